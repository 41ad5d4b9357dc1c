package blackbox

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/pb"
	"github.com/kelpfs/kelp/internal/pb/volumepb"
	"github.com/kelpfs/kelp/internal/testutil"
)

// TestShellReachesStandaloneVolume: a `kelp master` with signed file ids
// and access tokens, a separate `kelp volume` with the signing key but no
// tokens file. `kelp shell --access.token=ADMIN` marks a volume read-only
// on that volume server: the master vouches for the shell (GET
// /admin/token) and the volume server takes the vouched token. A vouched
// read-only identity may read the volume's status but not change it
// (PermissionDenied), and a made-up token gets Unauthenticated.
func TestShellReachesStandaloneVolume(t *testing.T) {
	dir := t.TempDir()
	admin, viewer := "admintok-"+auth.NewToken(), "viewertok-"+auth.NewToken()
	keyFile, tokFile := filepath.Join(dir, "jwt.key"), filepath.Join(dir, "tokens")
	os.WriteFile(keyFile, []byte("signkey-"+auth.NewToken()+"\n"), 0o600)
	os.WriteFile(tokFile, []byte("admin rw "+admin+"\nviewer ro "+viewer+"\n"), 0o600)
	ports := testutil.FreePorts(t, 2, pb.GRPCPortOffset, pb.RaftPortOffset)
	master, volume := hostport(ports[0]), hostport(ports[1])
	mp := startKelp(t, "master", "--ip=127.0.0.1", "--port="+strconv.Itoa(ports[0]), "--mdir="+filepath.Join(dir, "m"),
		"--jwt.signing.key=@"+keyFile, "--access.tokens="+tokFile)
	waitAnswers(t, "http://"+master+"/healthz")
	vp := startKelp(t, "volume", "--ip=127.0.0.1", "--port="+strconv.Itoa(ports[1]), "--master="+master,
		"--dir="+filepath.Join(dir, "v"), "--max=5", "--jwt.signing.key=@"+keyFile)
	waitAnswers(t, "http://"+volume+"/healthz")
	c := &secClient{t: t}
	var vid uint32
	waitFor(t, "an assign", func() bool {
		st, body := c.do("GET", "http://"+master+"/dir/assign", admin, nil)
		var a struct{ Fid string }
		if st != 200 || json.Unmarshal([]byte(body), &a) != nil {
			return false
		}
		id, err := fid.Parse(a.Fid)
		vid = uint32(id.Volume)
		return err == nil
	})
	shell := func(tok, script string) (string, error) {
		out, err := exec.Command(kelpBin, "shell", "--master="+master, "--access.token="+tok, "-c", script).CombinedOutput()
		return string(out), err
	}
	if out, err := shell(admin, "lock; volume.mark -volumeId "+strconv.Itoa(int(vid))+" -readonly; unlock"); err != nil {
		t.Fatalf("the shell with the masters' admin token could not mark volume %d on a volume server without tokens: %v\n%s\nmaster:\n%s\nvolume:\n%s",
			vid, err, out, tail(mp.log.String()), tail(vp.log.String()))
	}
	if st, body := c.do("GET", "http://"+master+"/admin/token", "", nil); st != 401 {
		t.Errorf("an admin token without an identity: %d %s", st, body)
	}

	// The volume server directly, with vouched tokens.
	vouch := func(tok string) string {
		st, body := c.do("GET", "http://"+master+"/admin/token", tok, nil)
		var a struct{ Auth string }
		if st != 200 || json.Unmarshal([]byte(body), &a) != nil || a.Auth == "" {
			t.Fatalf("GET /admin/token: %d %s", st, body)
		}
		return a.Auth
	}
	grpcAddr, err := pb.GRPCAddress(volume)
	if err != nil {
		t.Fatal(err)
	}
	call := func(tok string, mark bool) error {
		cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), auth.DialOption(auth.Static(tok)))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		vc := volumepb.NewVolumeServerClient(cc)
		if mark {
			_, err = vc.MarkVolume(ctx, &volumepb.MarkVolumeRequest{VolumeId: vid, ReadOnly: false})
		} else {
			_, err = vc.VolumeStatus(ctx, &volumepb.VolumeStatusRequest{VolumeId: vid})
		}
		return err
	}
	ro := vouch(viewer)
	if err := call(ro, false); err != nil {
		t.Errorf("status with a vouched read-only token: %v", err)
	}
	if err := call(ro, true); grpcstatus.Code(err) != codes.PermissionDenied {
		t.Errorf("mark with a vouched read-only token: %v, want PermissionDenied", err)
	}
	for name, tok := range map[string]string{"the admin access token itself": admin, "a forged admin token": auth.NewSigner("another-key-0123456789", time.Minute).AdminToken(auth.Identity{Name: "x", Role: auth.RoleWrite})} {
		if err := call(tok, true); grpcstatus.Code(err) != codes.Unauthenticated {
			t.Errorf("mark with %s: %v, want Unauthenticated", name, err)
		}
	}
	if err := call(vouch(admin), true); err != nil {
		t.Errorf("mark with a vouched read-write token: %v", err)
	}
	for _, s := range []string{admin, viewer} {
		if strings.Contains(mp.log.String(), s) || strings.Contains(vp.log.String(), s) {
			t.Error("an access token appears in a server's log")
		}
	}
}
