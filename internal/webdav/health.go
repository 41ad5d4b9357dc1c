package webdav

import "net/http"

// withHealthz answers a bare GET or HEAD /healthz with 200 "ok" before auth
// and WebDAV, as every Kelp server does, for probes that carry no
// credentials (Kubernetes, load balancers, `kelp health`). A request with
// credentials or a query still reaches WebDAV: a file named /healthz stays
// readable with a signed GET.
func withHealthz(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
			r.URL.RawQuery == "" && r.Header.Get("Authorization") == "" {
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("ok\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}
