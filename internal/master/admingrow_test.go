package master_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/master"
	"github.com/kelpfs/kelp/internal/testcluster"
)

// TestFollowerGrowsUnderAccessTokens grows a collection's volumes from a
// follower (the admin UI's "create collection") while the masters' API
// needs a token: the follower asks the leader under its own credentials,
// the server token of the signing key or its Config.AccessToken.
func TestFollowerGrowsUnderAccessTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("three masters and a volume server: not in -short")
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	const masterTok = "masters-own-token-0123456789"
	if err := os.WriteFile(tokens, []byte("ops rw "+masterTok+"\nmonitor ro read-only-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]testcluster.Options{
		"signing key":   {Signer: auth.NewSigner("grow-test-signing-key", 10*time.Second), Access: true},
		"access tokens": {Access: true, AccessTokens: tokens, MasterAccessToken: masterTok},
	} {
		t.Run(name, func(t *testing.T) {
			opts.Masters, opts.Volumes = 3, []testcluster.VolumeSpec{{}}
			c := testcluster.Start(t, opts)
			f := c.Followers()[0]
			// The API is closed to a caller without a token.
			resp, err := http.Post("http://"+f.Addr+"/vol/grow?collection=open", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("POST /vol/grow without a token: %d, want 401", resp.StatusCode)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ids, err := f.Master().GrowVolumes(ctx, "secure", "")
			if err != nil {
				t.Fatalf("grow from a follower: %v", err)
			}
			if len(ids) == 0 {
				t.Fatal("grow from a follower made no volume")
			}
			leader := c.Leader().Master()
			if n := countLayout(leader, "secure"); n != len(ids) {
				t.Fatalf("the leader has %d volumes of collection secure, the follower was told of %d (%v)", n, len(ids), ids)
			}
			// Bad input still comes back as the leader's own answer.
			if _, err := f.Master().GrowVolumes(ctx, "secure", "0x9"); err == nil || !strings.Contains(err.Error(), "400") {
				t.Fatalf("grow with replication 0x9 from a follower: %v, want the leader's 400", err)
			}
		})
	}
}

func countLayout(m *master.Server, collection string) int {
	n := 0
	for _, l := range m.TopologyStatus().Layouts {
		if l.Collection == collection {
			n += len(l.Volumes)
		}
	}
	return n
}
