package tlstest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/filerserver"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/masterpb"
	"github.com/kelpfs/kelp/internal/s3"
	"github.com/kelpfs/kelp/internal/security"
	"github.com/kelpfs/kelp/internal/testcluster"
)

func caPool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(b)
	return p
}

// TestClusterOverTLS: three masters (Raft under TLS), two volume servers, a
// filer and the S3 gateway, all over TLS with mutual TLS between servers.
func TestClusterOverTLS(t *testing.T) {
	dir, _ := Use(t)
	log := slog.New(slog.DiscardHandler)
	c := testcluster.Start(t, testcluster.Options{Masters: 3, Volumes: []testcluster.VolumeSpec{{}, {}}, Logger: log})
	c.WaitForVolumeServers(2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Assign, write and read through the masters and volume servers.
	kc, err := client.New(client.Config{Masters: c.MasterAddrs(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	id, _, err := kc.PutBytes(ctx, client.AssignRequest{}, []byte("over tls"), client.UploadOptions{})
	if err != nil {
		t.Fatalf("put over TLS: %v", err)
	}
	rc, _, err := kc.Get(ctx, id, nil)
	if err != nil {
		t.Fatalf("get over TLS: %v", err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if string(got) != "over tls" {
		t.Fatalf("read %q", got)
	}

	// A follower forwards an assign to the leader over TLS.
	follower := c.Followers()[0]
	resp, err := client.NewHTTPClient().Get(security.URL(follower.Addr) + "/dir/assign")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"fid"`) {
		t.Fatalf("assign through a follower over TLS: %s %s", resp.Status, body)
	}

	// The filer's HTTP API.
	f, err := filerserver.New(filerserver.Config{Masters: c.MasterAddrs(), Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithCancel(context.Background())
	fdone := make(chan error, 1)
	go func() { fdone <- f.Run(fctx) }()
	t.Cleanup(func() { fcancel(); <-fdone })
	hc := client.NewHTTPClient()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, security.URL(f.Addr())+"/dir/file.txt", strings.NewReader("filer over tls"))
	resp = waitDo(t, ctx, hc, req, func() *http.Request {
		r, _ := http.NewRequestWithContext(ctx, http.MethodPut, security.URL(f.Addr())+"/dir/file.txt", strings.NewReader("filer over tls"))
		return r
	})
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("filer PUT over TLS: %s", resp.Status)
	}
	resp, err = hc.Get(security.URL(f.Addr()) + "/dir/file.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "filer over tls" {
		t.Fatalf("filer GET over TLS: %s %q", resp.Status, got)
	}

	// The S3 gateway with the AWS SDK, trusting the CA only (no client certificate).
	gw, err := s3.New(s3.Config{Namespace: f.Filer(), Logger: log,
		Identities: []s3.Identity{{Name: "admin", Credentials: []s3.Credential{{AccessKey: "AKIDTLS", SecretKey: "tls-secret-0123"}}, Actions: []string{"Admin"}}}})
	if err != nil {
		t.Fatal(err)
	}
	gctx, gcancel := context.WithCancel(context.Background())
	gdone := make(chan error, 1)
	go func() { gdone <- gw.Run(gctx) }()
	t.Cleanup(func() { gcancel(); <-gdone })
	if !strings.HasPrefix(gw.URL(), "https://") {
		t.Fatalf("S3 URL %s", gw.URL())
	}
	sc := awss3.New(awss3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.URL()), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "AKIDTLS", SecretAccessKey: "tls-secret-0123"}, nil
		}),
		HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: caPool(t, dir)}}}})
	if _, err := sc.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("tls-bucket")}); err != nil {
		t.Fatalf("S3 CreateBucket over TLS: %v", err)
	}
	if _, err := sc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("tls-bucket"), Key: aws.String("k"), Body: bytes.NewReader([]byte("s3 over tls"))}); err != nil {
		t.Fatalf("S3 PutObject over TLS: %v", err)
	}
	obj, err := sc.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("tls-bucket"), Key: aws.String("k")})
	if err != nil {
		t.Fatalf("S3 GetObject over TLS: %v", err)
	}
	got, _ = io.ReadAll(obj.Body)
	obj.Body.Close()
	if string(got) != "s3 over tls" {
		t.Fatalf("S3 read %q", got)
	}

	// Plain HTTP is refused on every port: no 2xx or 3xx answer.
	var ports []string
	for _, m := range c.Masters {
		_, hp, _ := net.SplitHostPort(m.Addr)
		httpPort, _ := strconv.Atoi(hp)
		raft := net.JoinHostPort("127.0.0.1", strconv.Itoa(pb.DerivedPort(httpPort, pb.RaftPortOffset)))
		ports = append(ports, m.Addr, m.Master().GRPCAddr(), raft)
	}
	for _, v := range c.Volume {
		ports = append(ports, v.Addr, v.VolumeServer().GRPCAddr())
	}
	ports = append(ports, f.Addr(), f.GRPCAddr(), gw.Addr())
	plain := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	for _, p := range ports {
		resp, err := plain.Get("http://" + p + "/healthz")
		if errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("nothing listens on %s", p)
		}
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Errorf("plain HTTP on %s answered %s", p, resp.Status)
			}
		}
	}

	// A server whose certificate comes from another CA cannot join: the
	// master refuses its heartbeat stream. The same call with this
	// cluster's certificate goes through.
	rogueDir := t.TempDir()
	if _, err := security.CertsFor(rogueDir, []string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	rogueCert, err := tls.LoadX509KeyPair(filepath.Join(rogueDir, "127.0.0.1.crt"), filepath.Join(rogueDir, "127.0.0.1.key"))
	if err != nil {
		t.Fatal(err)
	}
	// It trusts the cluster's CA (so only its own certificate is wrong).
	rogue := &tls.Config{RootCAs: caPool(t, dir), Certificates: []tls.Certificate{rogueCert}}
	leader := c.Leader().Master().GRPCAddr()
	if err := heartbeat(ctx, leader, grpc.WithTransportCredentials(credentials.NewTLS(rogue))); status.Code(err) != codes.Unavailable {
		t.Fatalf("a volume server with a certificate from another CA: heartbeat answered %v, want Unavailable (handshake refused)", err)
	}
	if err := clusterStatus(ctx, leader, grpc.WithTransportCredentials(credentials.NewTLS(rogue))); err == nil {
		t.Fatal("a certificate from another CA was accepted on the master's gRPC port")
	}
	if err := clusterStatus(ctx, leader, pb.DialOptions()...); err != nil {
		t.Fatalf("the cluster's own certificate on the master's gRPC port: %v", err)
	}
	// Without a client certificate at all, gRPC refuses too.
	nocert := &tls.Config{RootCAs: caPool(t, dir)}
	if err := clusterStatus(ctx, leader, grpc.WithTransportCredentials(credentials.NewTLS(nocert))); err == nil {
		t.Fatal("a gRPC call without a client certificate went through")
	}
}

// waitDo sends req, and again (from next) while the answer is 5xx: the
// filer's first write may come before it has its masters.
func waitDo(t *testing.T, ctx context.Context, hc *http.Client, req *http.Request, next func() *http.Request) *http.Response {
	t.Helper()
	for {
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode/100 != 5 || ctx.Err() != nil {
			return resp
		}
		resp.Body.Close()
		req = next()
	}
}

// heartbeat opens a heartbeat stream to the master at addr as a volume
// server does, sends a beat and waits for the answer.
func heartbeat(ctx context.Context, addr string, opts ...grpc.DialOption) error {
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := masterpb.NewMasterClient(cc).Heartbeat(ctx)
	if err != nil {
		return err
	}
	if err := st.Send(&masterpb.HeartbeatRequest{Ip: "127.0.0.1", Port: 1}); err != nil {
		_, err = st.Recv() // the stream's real error
		return err
	}
	_, err = st.Recv()
	return err
}

// clusterStatus calls the master at addr once.
func clusterStatus(ctx context.Context, addr string, opts ...grpc.DialOption) error {
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := masterpb.NewMasterClient(cc).ClusterStatus(ctx, &masterpb.ClusterStatusRequest{}); err != nil {
		return fmt.Errorf("cluster status: %w", err)
	}
	return nil
}
