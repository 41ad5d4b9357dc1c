package pb

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/testutil"
)

// panickyHealth is a gRPC service whose methods panic when asked about
// the service "boom".
type panickyHealth struct {
	grpc_health_v1.UnimplementedHealthServer
}

func (panickyHealth) Check(_ context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	if req.Service == "boom" {
		var m map[string]int
		m["x"]++
	}
	return &grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING}, nil
}

func (panickyHealth) Watch(req *grpc_health_v1.HealthCheckRequest, s grpc.ServerStreamingServer[grpc_health_v1.HealthCheckResponse]) error {
	if req.Service == "boom" {
		panic("stream boom")
	}
	return s.Send(&grpc_health_v1.HealthCheckResponse{Status: grpc_health_v1.HealthCheckResponse_SERVING})
}

// A gRPC method that panics answers codes.Internal, the panic is logged
// with its stack, and the server keeps serving: unary and streaming.
func TestGRPCPanicIsInternal(t *testing.T) {
	logs := &testutil.Buffer{}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions(slog.New(slog.NewTextHandler(logs, nil)))...)
	grpc_health_v1.RegisterHealthServer(srv, panickyHealth{})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := grpc_health_v1.NewHealthClient(cc)
	ctx := context.Background()

	_, err = hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "boom"})
	if status.Code(err) != codes.Internal {
		t.Fatalf("unary panic: %v, want codes.Internal", err)
	}
	ws, err := hc.Watch(ctx, &grpc_health_v1.HealthCheckRequest{Service: "boom"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ws.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("stream panic: %v, want codes.Internal", err)
	}
	if _, err := hc.Check(ctx, &grpc_health_v1.HealthCheckRequest{}); err != nil {
		t.Fatalf("after the panics: %v", err)
	}
	log := logs.String()
	for _, want := range []string{"level=ERROR", "/grpc.health.v1.Health/Check", "assignment to entry in nil map",
		"/grpc.health.v1.Health/Watch", "stream boom", "recover_test.go"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
}
