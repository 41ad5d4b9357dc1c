package s3

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// firstStatusLine sends the head of a PUT with Expect: 100-continue and
// returns the first status line the gateway answers, without sending the
// body. Signed with ak/sk unless ak is "".
func firstStatusLine(t *testing.T, e *env, path, ak, sk string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, e.gw.URL()+path, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	if ak != "" {
		req.Header.Set("x-amz-content-sha256", "UNSIGNED-PAYLOAD")
		if err := v4.NewSigner().SignHTTP(e.ctx, aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req,
			"UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := net.Dial("tcp", e.gw.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n", path, req.Host)
	for k, vs := range req.Header {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first status line: %v", err)
	}
	return strings.TrimSpace(line)
}

// An unauthenticated or unauthorised PUT with Expect: 100-continue gets
// its 403 without being invited to send the body: authentication and
// authorisation are decided before the body is read.
func TestExpectContinueAfterAuth(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities, Identity{Name: "reader", Credentials: []Credential{{"AKREADER", "reader-secret"}},
			Actions: []string{"Read", "List"}})
	})
	e.mkBucket("expect")
	for _, tc := range []struct {
		name, ak, sk, want string
	}{
		{"anonymous", "", "", "HTTP/1.1 403"},
		{"bad signature", testAK, "wrong-secret", "HTTP/1.1 403"},
		{"not allowed to write", "AKREADER", "reader-secret", "HTTP/1.1 403"},
		{"allowed", testAK, testSK, "HTTP/1.1 100"},
	} {
		if got := firstStatusLine(t, e, "/expect/k", tc.ak, tc.sk); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: first status line %q, want %s", tc.name, got, tc.want)
		}
	}
}
