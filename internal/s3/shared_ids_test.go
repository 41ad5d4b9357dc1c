package s3

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kelpfs/kelp/internal/filer"
	"github.com/kelpfs/kelp/internal/testutil"
)

func writeShared(t *testing.T, ns *filer.Filer, s string) {
	t.Helper()
	if _, err := ns.WriteFile(context.Background(), SharedIdentitiesPath, strings.NewReader(s), filer.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestSharedIdentities: the identities in the filer's shared file are
// taken at start and on every change; a bad version (even at start) keeps
// the gateway up with the identities it had; removing a key refuses it.
func TestSharedIdentities(t *testing.T) {
	var ns *filer.Filer
	logs := &recordingHandler{}
	e := startEnv(t, func(c *Config) {
		ns = c.Namespace.(*filer.Filer)
		writeShared(t, ns, `{"identities": [`) // broken before the start
		c.SharedIdentities = SharedIdentitiesPath
		c.ReloadInterval = 20 * time.Millisecond
		c.Logger = slog.New(logs)
	})
	if logs.count("s3: shared identities not loaded") != 1 {
		t.Fatalf("a broken shared file at start was not logged")
	}
	list := func(c *s3.Client) error { _, err := c.ListBuckets(e.ctx, &s3.ListBucketsInput{}); return err }
	c1 := e.client("AKSH1", "sh1")
	e.wantCode(list(c1), "InvalidAccessKeyId")

	writeShared(t, ns, `{"identities":[{"name":"u1","credentials":[{"accessKey":"AKSH1","secretKey":"sh1"}],"actions":["Admin"]}]}`)
	if !testutil.Eventually(5*time.Second, func() bool { return list(c1) == nil }) {
		t.Fatalf("the shared key is not accepted: %v", list(c1))
	}
	// A version giving the static key again does not load: AKSH1 stays.
	writeShared(t, ns, `{"identities":[{"name":"dup","credentials":[{"accessKey":"`+testAK+`","secretKey":"x"}],"actions":["Admin"]}]}`)
	testutil.WaitFor(t, 5*time.Second, func() bool { return logs.count("s3: identities not reloaded") > 0 }, "the duplicate key is logged")
	if err := list(c1); err != nil {
		t.Fatalf("a bad version dropped the working identities: %v", err)
	}
	if err := list(e.c); err != nil {
		t.Fatalf("the static key: %v", err)
	}
	// Removed: refused.
	if err := ns.DeleteEntry(context.Background(), SharedIdentitiesPath, false); err != nil {
		t.Fatal(err)
	}
	if !testutil.Eventually(5*time.Second, func() bool { return code(list(c1)) == "InvalidAccessKeyId" }) {
		t.Fatalf("the removed key still works")
	}
	if err := list(e.c); err != nil {
		t.Fatalf("the static key after the removal: %v", err)
	}
}
