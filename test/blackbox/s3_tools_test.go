package blackbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rcloneTool is rclone with its own config file holding remote "k:", an S3
// remote of provider Other on s, with rclone's defaults otherwise.
func rcloneTool(t *testing.T, s *s3Server) *tool {
	bin := needTool(t, "rclone")
	home := t.TempDir()
	conf := filepath.Join(home, "rclone.conf")
	writeFile(t, conf, []byte(fmt.Sprintf("[k]\ntype = s3\nprovider = Other\naccess_key_id = %s\nsecret_access_key = %s\n"+
		"endpoint = %s\nregion = %s\nforce_path_style = true\n", s3AccessKey, s3SecretKey, s.endpoint, s3Region)))
	// baseEnv drops AWS_CA_BUNDLE, which rclone refuses to start with.
	return &tool{t: t, bin: bin, env: append(baseEnv(home), "RCLONE_CONFIG="+conf), dir: home}
}

// rcloneRoundTrip copies tree up, checks it, syncs a changed tree, checks
// again, downloads both and compares them byte for byte; extra are flags
// for every command (e.g. --transfers 20).
func rcloneRoundTrip(t *testing.T, rc *tool, tree, remote string, extra ...string) {
	cmd := func(args ...string) []string { return append(append(args[:1:1], extra...), args[1:]...) }
	work := t.TempDir()
	start := time.Now()
	rc.run(cmd("copy", tree, remote)...)
	t.Logf("rclone copy %s of %d files: %.1f s", strings.Join(extra, " "), len(treeSums(t, tree)), time.Since(start).Seconds())
	rc.run(cmd("check", tree, remote)...)
	down := filepath.Join(work, "down")
	rc.run(cmd("copy", remote, down)...)
	sameTree(t, tree, down)

	// Change the tree: rewrite some files with other bytes of the same size
	// (only a hash tells them apart), delete some, add some; then sync.
	changed := filepath.Join(work, "changed")
	rc.run("copy", tree, changed) // local to local
	sums := treeSums(t, changed)
	n := 0
	for rel := range sums {
		p := filepath.Join(changed, filepath.FromSlash(rel))
		switch {
		case n%3 == 0:
			b, _ := os.ReadFile(p)
			for i := range b {
				b[i] ^= 0xA5
			}
			writeFile(t, p, b)
		case n%3 == 1:
			os.Remove(p)
		default:
			writeFile(t, p+".new", []byte("new file "+rel))
		}
		if n++; n == 30 {
			break
		}
	}
	// check sees the same-size rewrites: the gateway's ETag is the MD5.
	if r := rc.try(cmd("check", changed, remote)...); r.code == 0 {
		t.Fatalf("rclone check passed on a tree that differs from the remote: %s", r)
	}
	start = time.Now()
	rc.run(cmd("sync", changed, remote)...)
	t.Logf("rclone sync %s of the changed tree: %.1f s", strings.Join(extra, " "), time.Since(start).Seconds())
	rc.run(cmd("check", changed, remote)...)
	rc.run(cmd("sync", remote, down)...)
	sameTree(t, changed, down)
}

func testRclone(t *testing.T, s *s3Server) {
	rc := rcloneTool(t, s)
	tree := makeTree(t, filepath.Join(t.TempDir(), "tree"), 500, 4000, 3, 2<<20, 10)
	t.Run("default", func(t *testing.T) { rcloneRoundTrip(t, rc, tree, "k:rclone-default/tree") })
	t.Run("transfers-20", func(t *testing.T) { rcloneRoundTrip(t, rc, tree, "k:rclone-transfers/tree", "--transfers", "20") })
	t.Run("multipart", func(t *testing.T) {
		// rclone's own multipart upload (cutoff lowered to 5 MiB), checked
		// through the MD5 it stores in metadata and by downloading.
		work := t.TempDir()
		src := filepath.Join(work, "src")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		writeRandomFile(t, filepath.Join(src, "mp.bin"), 17<<20+3, 11)
		rc.run("copy", "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", src, "k:rclone-mp/x")
		rc.run("check", src, "k:rclone-mp/x")
		rc.run("copy", "k:rclone-mp/x", filepath.Join(work, "down"))
		sameTree(t, src, filepath.Join(work, "down"))
	})
}

// s3cmdTool is s3cmd with a config file for s: path-style (host_bucket
// without %(bucket)s), SigV4, plain HTTP.
func s3cmdTool(t *testing.T, s *s3Server) (*tool, string) {
	bin := needTool(t, "s3cmd")
	home := t.TempDir()
	conf := filepath.Join(home, ".s3cfg")
	writeFile(t, conf, []byte(fmt.Sprintf("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\n"+
		"use_https = False\nsignature_v2 = False\nbucket_location = %s\ncheck_ssl_certificate = False\n",
		s3AccessKey, s3SecretKey, s.hostport, s.hostport, s3Region)))
	return &tool{t: t, bin: bin, env: baseEnv(home), dir: home}, conf
}

func testS3cmd(t *testing.T, s *s3Server) {
	c, conf := s3cmdTool(t, s)
	sc := func(args ...string) string { return c.run(append([]string{"-c", conf}, args...)...) }
	work := t.TempDir()
	sc("mb", "s3://s3cmd-b")
	small := filepath.Join(work, "small file.txt")
	writeFile(t, small, []byte("s3cmd was here\n"))
	big := filepath.Join(work, "big.bin")
	writeRandomFile(t, big, 20<<20+1, 12) // above s3cmd's 15 MiB chunk: multipart
	empty := filepath.Join(work, "empty")
	writeFile(t, empty, nil)
	sc("put", small, "s3://s3cmd-b/dir/small file.txt")
	sc("put", big, "s3://s3cmd-b/dir/big.bin")
	sc("put", empty, "s3://s3cmd-b/empty")

	ls := sc("ls", "--recursive", "s3://s3cmd-b")
	for _, want := range []string{"s3://s3cmd-b/dir/small file.txt", "s3://s3cmd-b/dir/big.bin", "s3://s3cmd-b/empty"} {
		if !strings.Contains(ls, want) {
			t.Errorf("s3cmd ls lacks %s:\n%s", want, ls)
		}
	}
	if !strings.Contains(ls, fmt.Sprint(20<<20+1)) {
		t.Errorf("s3cmd ls does not show the big object's size:\n%s", ls)
	}
	for name, src := range map[string]string{"dir/small file.txt": small, "dir/big.bin": big, "empty": empty} {
		got := filepath.Join(work, "got-"+filepath.Base(name))
		sc("get", "s3://s3cmd-b/"+name, got)
		sameFile(t, src, got)
	}
	sc("del", "s3://s3cmd-b/dir/small file.txt")
	sc("del", "s3://s3cmd-b/dir/big.bin", "s3://s3cmd-b/empty")
	if ls := sc("ls", "--recursive", "s3://s3cmd-b"); strings.TrimSpace(ls) != "" {
		t.Errorf("objects left after s3cmd del:\n%s", ls)
	}
	if r := c.try("-c", conf, "get", "s3://s3cmd-b/dir/big.bin", filepath.Join(work, "gone")); r.code == 0 {
		t.Errorf("s3cmd get of a deleted object succeeded: %s", r)
	}
	sc("rb", "s3://s3cmd-b")
}

// TestS3LargeWorkloads runs issue 5's first workloads at full size: a
// 5,000-file tree synced with rclone and checked, and 200 MiB of 1 MiB files
// through the aws CLI and rclone. The 1 GiB object runs in
// TestS3RealClients/aws-big-object under the same switch.
func TestS3LargeWorkloads(t *testing.T) {
	if !large() {
		t.Skip("the full-size S3 workloads are off with -short or KELP_TEST_LARGE=0")
	}
	s := startS3Server(t)
	rc := rcloneTool(t, s)
	work := t.TempDir()
	t.Run("rclone-5000-files", func(t *testing.T) {
		tree := makeTree(t, filepath.Join(work, "tree5000"), 5000, 8000, 0, 0, 20)
		rcloneRoundTrip(t, rc, tree, "k:large-tree/tree", "--transfers", "20")
	})
	t.Run("200MiB-of-1MiB-files", func(t *testing.T) {
		src := filepath.Join(work, "mib")
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 200; i++ {
			writeRandomFile(t, filepath.Join(src, fmt.Sprintf("f%03d.bin", i)), 1<<20, uint64(1000+i))
		}
		a := awsCLI(t, s, s3SecretKey)
		a.aws(s, "s3", "mb", "s3://large-mib") // sync does not create buckets
		start := time.Now()
		a.aws(s, "s3", "sync", src, "s3://large-mib/aws")
		t.Logf("aws s3 sync of 200 x 1 MiB: %.1f s", time.Since(start).Seconds())
		down := filepath.Join(work, "mib-aws")
		a.aws(s, "s3", "sync", "s3://large-mib/aws", down)
		sameTree(t, src, down)
		rcloneRoundTrip(t, rc, src, "k:large-mib/rclone", "--transfers", "20")
	})
	if t.Failed() {
		t.Logf("server log (tail):\n%s", tail(s.proc.log.String()))
	}
}
