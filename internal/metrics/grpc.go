package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

type grpcMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func (r *Registry) grpcVecs() *grpcMetrics {
	r.grpcOnce.Do(func() {
		m := &grpcMetrics{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "kelp_grpc_requests_total", Help: "gRPC calls finished (streams when they end), by API, method and status code.",
			}, []string{"api", "method", "code"}),
			latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
				Name: "kelp_grpc_request_duration_seconds", Help: "Duration of gRPC calls (of streams: their whole life).",
				Buckets: latencyBuckets,
			}, []string{"api", "method"}),
		}
		r.MustRegister(m.requests, m.latency)
		r.grpc = m
	})
	return r.grpc
}

// GRPCOptions are server options that measure api's gRPC calls; append
// them to pb.ServerOptions. A nil registry returns none.
func (r *Registry) GRPCOptions(api string) []grpc.ServerOption {
	if r == nil {
		return nil
	}
	m := r.grpcVecs()
	observe := func(method string, start time.Time, err error) {
		m.requests.WithLabelValues(api, method, status.Code(err).String()).Inc()
		m.latency.WithLabelValues(api, method).Observe(time.Since(start).Seconds())
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			start := time.Now()
			resp, err := h(ctx, req)
			observe(info.FullMethod, start, err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			start := time.Now()
			err := h(srv, ss)
			observe(info.FullMethod, start, err)
			return err
		}),
	}
}
