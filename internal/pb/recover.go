package pb

import (
	"context"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Without recovery a panic in a gRPC method takes the whole process down
// (grpc-go does not recover handler panics). These interceptors turn it into
// a codes.Internal answer and an error-level log with the stack: one bad
// request fails, the server keeps serving, and the crash is visible.
//
// They log to the server's logger (nil: slog.Default).

func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if v := recover(); v != nil {
				err = panicked(log, info.FullMethod, v)
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = panicked(log, info.FullMethod, v)
			}
		}()
		return handler(srv, ss)
	}
}

func panicked(log *slog.Logger, method string, v any) error {
	if log == nil {
		log = slog.Default()
	}
	log.Error("grpc: handler panicked", "method", method, "panic", v, "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "%s: internal error (the server logged it)", method)
}
