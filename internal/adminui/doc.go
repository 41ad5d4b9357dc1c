// Package adminui is Kelp's admin web UI, served by every master at / of
// its HTTP port (docs/admin-ui.md).
//
// The master takes the UI as master.Config.AdminUI, a constructor the CLI
// passes in, so this package imports the master and not the reverse. The UI
// reads through Source (the master itself, or an in-memory fake in tests and
// benchmarks): the masters' roles asked live with short timeouts, the
// master's own topology (a follower's mirrored copy), and RunShell, the
// shell path the automatic EC rebuild takes, for maintenance under the admin
// lock. Buckets and the filer browser talk to one filer's HTTP API.
//
// Pages are html/template with one small script (static/app.js); every
// page works without JavaScript and pictures are SVG drawn here. Access
// needs the configured user and password: a login form opening an
// in-memory session, or HTTP basic auth; every POST carries a CSRF token
// (auth.go).
package adminui
