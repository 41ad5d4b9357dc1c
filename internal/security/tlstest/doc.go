// Package tlstest turns TLS on for a test (Use) and holds the tests of a
// whole cluster with TLS on: TLS is process-wide (security.SetProcess), so
// they run in a test binary of their own.
package tlstest
