package filerserver

import (
	"net/http"
	"strings"

	"github.com/kelpfs/kelp/internal/auth"
)

// With Config.Access set, every request but /healthz authenticates: reads
// (HTTP GET/HEAD; gRPC lookups, listings, subscriptions, configuration,
// statfs) need the read-only role, everything else read-write. Refusals
// are 401 / 403 (gRPC Unauthenticated / PermissionDenied) before the
// request is looked at.

func httpNeed(r *http.Request) auth.Role {
	if r.URL.Path == "/healthz" {
		return auth.RoleNone
	}
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return auth.RoleRead
	}
	return auth.RoleWrite
}

func grpcNeed(method string) auth.Role {
	switch method[strings.LastIndexByte(method, '/')+1:] {
	case "LookupEntry", "ListEntries", "SubscribeMetadata", "GetConfiguration", "Statfs":
		return auth.RoleRead
	}
	return auth.RoleWrite
}
