package blackbox

import (
	"crypto/md5"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kelpfs/kelp/internal/testutil"
)

// TestS3RealClients starts one `kelp server` with known keys and runs every
// client against it, each in its own bucket.
func TestS3RealClients(t *testing.T) {
	s := startS3Server(t)
	t.Run("anonymous-refused", func(t *testing.T) { testS3Anonymous(t, s) })
	t.Run("aws-s3", func(t *testing.T) { testAWSHighLevel(t, s) })
	t.Run("aws-s3api", func(t *testing.T) { testAWSAPI(t, s) })
	t.Run("aws-multipart-api", func(t *testing.T) { testAWSMultipartAPI(t, s) })
	t.Run("aws-presign", func(t *testing.T) { testAWSPresign(t, s) })
	t.Run("boto3-presigned-post", func(t *testing.T) { testBoto3PresignedPost(t, s) })
	t.Run("aws-public-read-object", func(t *testing.T) { testAWSPublicObject(t, s) })
	t.Run("aws-auth-and-errors", func(t *testing.T) { testAWSErrors(t, s) })
	t.Run("aws-odd-keys", func(t *testing.T) { testAWSOddKeys(t, s) })
	t.Run("aws-big-object", func(t *testing.T) { testAWSBigObject(t, s) })
	t.Run("rclone", func(t *testing.T) { testRclone(t, s) })
	t.Run("s3cmd", func(t *testing.T) { testS3cmd(t, s) })
	if t.Failed() {
		t.Logf("server log (tail):\n%s", tail(s.proc.log.String()))
	}
}

// testS3Anonymous: the gateway of `kelp server` is never open by accident.
func testS3Anonymous(t *testing.T, s *s3Server) {
	for _, u := range []string{s.endpoint + "/", s.endpoint + "/somebucket/somekey"} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("anonymous GET %s: %s, want 403", u, resp.Status)
		}
	}
}

// testAWSHighLevel: aws s3 mb, cp up and down (small and multipart), sync,
// ls --recursive, rm --recursive, rb.
func testAWSHighLevel(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	a.aws(s, "s3", "mb", "s3://aws-high")

	small := filepath.Join(work, "small.txt")
	writeFile(t, small, []byte("hello, kelp\n"))
	big := filepath.Join(work, "big.bin")
	writeRandomFile(t, big, 20<<20+7, 1) // above the CLI's 8 MiB threshold: multipart
	a.aws(s, "s3", "cp", small, "s3://aws-high/dir/small.txt")
	a.aws(s, "s3", "cp", big, "s3://aws-high/big.bin")
	a.aws(s, "s3", "cp", "s3://aws-high/dir/small.txt", filepath.Join(work, "small.got"))
	a.aws(s, "s3", "cp", "s3://aws-high/big.bin", filepath.Join(work, "big.got"))
	sameFile(t, small, filepath.Join(work, "small.got"))
	sameFile(t, big, filepath.Join(work, "big.got"))

	// A multipart upload's ETag is md5-of-md5s-N, N the parts the CLI sent
	// (8 MiB parts: 3).
	var head struct {
		ETag          string
		ContentLength int64
	}
	jsonOut(t, a.aws(s, "s3api", "head-object", "--bucket", "aws-high", "--key", "big.bin"), &head)
	if head.ContentLength != 20<<20+7 || !strings.HasSuffix(strings.Trim(head.ETag, `"`), "-3") {
		t.Errorf("head-object of the multipart upload: %+v, want 20 MiB + 7 and an ETag ending in -3", head)
	}

	tree := makeTree(t, filepath.Join(work, "tree"), 60, 3000, 1, 9<<20, 2)
	a.aws(s, "s3", "sync", tree, "s3://aws-high/tree")
	// A second sync has nothing to do.
	if out := a.aws(s, "s3", "sync", tree, "s3://aws-high/tree"); strings.Contains(out, "upload:") {
		t.Errorf("second sync uploaded again:\n%s", out)
	}
	down := filepath.Join(work, "down")
	a.aws(s, "s3", "sync", "s3://aws-high/tree", down)
	sameTree(t, tree, down)

	// ls --recursive lists every key once, with its size.
	want := treeSums(t, tree)
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(a.aws(s, "s3", "ls", "--recursive", "s3://aws-high/tree/")), "\n") {
		if len(strings.Fields(line)) < 4 {
			t.Fatalf("ls line %q", line)
		}
		k := strings.TrimPrefix(lsKey(line), "tree/")
		if listed[k] {
			t.Errorf("ls lists %q twice", k)
		}
		listed[k] = true
	}
	if len(listed) != len(want) {
		t.Errorf("ls --recursive lists %d keys, want %d", len(listed), len(want))
	}
	for k := range want {
		if !listed[k] {
			t.Errorf("ls --recursive lacks %q", k)
		}
	}

	a.aws(s, "s3", "rm", "--recursive", "s3://aws-high")
	if out := a.aws(s, "s3", "ls", "--recursive", "s3://aws-high"); strings.TrimSpace(out) != "" {
		t.Errorf("bucket not empty after rm --recursive:\n%s", out)
	}
	a.aws(s, "s3", "rb", "s3://aws-high")
	if out := a.aws(s, "s3", "ls"); strings.Contains(out, "aws-high") {
		t.Errorf("bucket still listed after rb:\n%s", out)
	}
}

// lsKey is the key of an `aws s3 ls --recursive` line:
// "2024-01-02 03:04:05       1234 some key with spaces".
func lsKey(line string) string {
	rest := strings.TrimSpace(line)
	for range 3 { // date, time, size
		i := strings.IndexByte(rest, ' ')
		if i < 0 {
			return ""
		}
		rest = strings.TrimLeft(rest[i:], " ")
	}
	return rest
}

// testAWSAPI: s3api put/get/head/list-objects-v2/copy-object/delete-objects.
func testAWSAPI(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	a.aws(s, "s3api", "create-bucket", "--bucket", "aws-api")
	rng := rand.New(rand.NewPCG(3, 3))
	body := randomBytes(rng, 100_000)
	src := filepath.Join(work, "body")
	writeFile(t, src, body)

	var put struct{ ETag string }
	jsonOut(t, a.aws(s, "s3api", "put-object", "--bucket", "aws-api", "--key", "docs/a.bin", "--body", src,
		"--content-type", "application/x-kelp", "--metadata", "color=blue,owner=ops",
		"--cache-control", "max-age=60", "--content-disposition", "attachment; filename=a.bin"), &put)
	if strings.Trim(put.ETag, `"`) != md5hex(body) {
		t.Errorf("put-object ETag %s, want the MD5 %s", put.ETag, md5hex(body))
	}
	var head struct {
		ContentLength      int64
		ContentType        string
		ETag               string
		CacheControl       string
		ContentDisposition string
		Metadata           map[string]string
	}
	jsonOut(t, a.aws(s, "s3api", "head-object", "--bucket", "aws-api", "--key", "docs/a.bin"), &head)
	if head.ContentLength != int64(len(body)) || head.ContentType != "application/x-kelp" || head.ETag != put.ETag ||
		head.CacheControl != "max-age=60" || head.ContentDisposition != "attachment; filename=a.bin" ||
		head.Metadata["color"] != "blue" || head.Metadata["owner"] != "ops" {
		t.Errorf("head-object: %+v", head)
	}
	a.aws(s, "s3api", "get-object", "--bucket", "aws-api", "--key", "docs/a.bin", filepath.Join(work, "a.got"))
	sameFile(t, src, filepath.Join(work, "a.got"))
	// A ranged get returns exactly those bytes.
	a.aws(s, "s3api", "get-object", "--bucket", "aws-api", "--key", "docs/a.bin", "--range", "bytes=1000-1999", filepath.Join(work, "range.got"))
	if got, _ := os.ReadFile(filepath.Join(work, "range.got")); string(got) != string(body[1000:2000]) {
		t.Errorf("ranged get-object returned %d bytes that differ from [1000,2000)", len(got))
	}

	// copy-object within the bucket, metadata copied.
	a.aws(s, "s3api", "copy-object", "--bucket", "aws-api", "--key", "docs/copy.bin", "--copy-source", "aws-api/docs/a.bin")
	a.aws(s, "s3api", "get-object", "--bucket", "aws-api", "--key", "docs/copy.bin", filepath.Join(work, "copy.got"))
	sameFile(t, src, filepath.Join(work, "copy.got"))
	jsonOut(t, a.aws(s, "s3api", "head-object", "--bucket", "aws-api", "--key", "docs/copy.bin"), &head)
	if head.Metadata["color"] != "blue" || head.ContentType != "application/x-kelp" {
		t.Errorf("copy-object did not copy metadata: %+v", head)
	}

	// list-objects-v2 with a delimiter, and paging with max-items.
	for i := 0; i < 5; i++ {
		writeFile(t, filepath.Join(work, "logs", fmt.Sprintf("%d.log", i)), body[i*100:])
	}
	a.aws(s, "s3", "cp", "--recursive", filepath.Join(work, "logs"), "s3://aws-api/logs/2024/")
	var list struct {
		Contents       []struct{ Key string }
		CommonPrefixes []struct{ Prefix string }
		KeyCount       int
	}
	jsonOut(t, a.aws(s, "s3api", "list-objects-v2", "--bucket", "aws-api", "--delimiter", "/"), &list)
	var prefixes []string
	for _, p := range list.CommonPrefixes {
		prefixes = append(prefixes, p.Prefix)
	}
	sort.Strings(prefixes)
	if len(list.Contents) != 0 || strings.Join(prefixes, ",") != "docs/,logs/" {
		t.Errorf("list with delimiter: contents %v, prefixes %v; want none and docs/,logs/", list.Contents, prefixes)
	}
	list.Contents = nil
	// --page-size 2 makes the CLI follow continuation tokens itself.
	jsonOut(t, a.aws(s, "s3api", "list-objects-v2", "--bucket", "aws-api", "--prefix", "logs/", "--page-size", "2"), &list)
	if len(list.Contents) != 5 || list.Contents[0].Key != "logs/2024/0.log" || list.Contents[4].Key != "logs/2024/4.log" {
		t.Errorf("paged list of logs/: %v", list.Contents)
	}

	// delete-objects removes several keys at once.
	del := `{"Objects":[{"Key":"logs/2024/0.log"},{"Key":"logs/2024/1.log"},{"Key":"docs/copy.bin"}]}`
	var delOut struct {
		Deleted []struct{ Key string }
		Errors  []any
	}
	jsonOut(t, a.aws(s, "s3api", "delete-objects", "--bucket", "aws-api", "--delete", del), &delOut)
	if len(delOut.Deleted) != 3 || len(delOut.Errors) != 0 {
		t.Errorf("delete-objects: %+v", delOut)
	}
	list.Contents = nil
	jsonOut(t, a.aws(s, "s3api", "list-objects-v2", "--bucket", "aws-api"), &list)
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	if strings.Join(keys, ",") != "docs/a.bin,logs/2024/2.log,logs/2024/3.log,logs/2024/4.log" {
		t.Errorf("after delete-objects the bucket holds %v", keys)
	}
}

// testAWSMultipartAPI: create-multipart-upload, upload-part, list-parts,
// complete (ETag md5-of-md5s-N), abort.
func testAWSMultipartAPI(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	a.aws(s, "s3", "mb", "s3://aws-mpu")
	rng := rand.New(rand.NewPCG(4, 4))
	parts := [][]byte{randomBytes(rng, 5<<20), randomBytes(rng, 5<<20), randomBytes(rng, 1234)}

	var create struct{ UploadId string }
	jsonOut(t, a.aws(s, "s3api", "create-multipart-upload", "--bucket", "aws-mpu", "--key", "mp/obj"), &create)
	if create.UploadId == "" {
		t.Fatal("no upload id")
	}
	type part struct {
		ETag       string
		PartNumber int
	}
	var done []part
	var whole []byte
	var md5s []byte
	for i, p := range parts {
		f := filepath.Join(work, fmt.Sprintf("part%d", i+1))
		writeFile(t, f, p)
		var up struct{ ETag string }
		jsonOut(t, a.aws(s, "s3api", "upload-part", "--bucket", "aws-mpu", "--key", "mp/obj", "--upload-id", create.UploadId,
			"--part-number", fmt.Sprint(i+1), "--body", f), &up)
		if strings.Trim(up.ETag, `"`) != md5hex(p) {
			t.Errorf("part %d ETag %s, want %s", i+1, up.ETag, md5hex(p))
		}
		done = append(done, part{up.ETag, i + 1})
		whole = append(whole, p...)
		sum := md5.Sum(p)
		md5s = append(md5s, sum[:]...)
	}
	var lp struct {
		Parts []struct {
			PartNumber int
			Size       int64
		}
	}
	jsonOut(t, a.aws(s, "s3api", "list-parts", "--bucket", "aws-mpu", "--key", "mp/obj", "--upload-id", create.UploadId), &lp)
	if len(lp.Parts) != 3 || lp.Parts[0].Size != 5<<20 || lp.Parts[2].PartNumber != 3 || lp.Parts[2].Size != 1234 {
		t.Errorf("list-parts: %+v", lp.Parts)
	}
	var uploads struct {
		Uploads []struct{ Key, UploadId string }
	}
	jsonOut(t, a.aws(s, "s3api", "list-multipart-uploads", "--bucket", "aws-mpu"), &uploads)
	if len(uploads.Uploads) != 1 || uploads.Uploads[0].UploadId != create.UploadId {
		t.Errorf("list-multipart-uploads: %+v", uploads)
	}
	mpu := fmt.Sprintf(`{"Parts":[{"ETag":%q,"PartNumber":1},{"ETag":%q,"PartNumber":2},{"ETag":%q,"PartNumber":3}]}`,
		done[0].ETag, done[1].ETag, done[2].ETag)
	var complete struct{ ETag string }
	jsonOut(t, a.aws(s, "s3api", "complete-multipart-upload", "--bucket", "aws-mpu", "--key", "mp/obj",
		"--upload-id", create.UploadId, "--multipart-upload", mpu), &complete)
	if want := md5hex(md5s) + "-3"; strings.Trim(complete.ETag, `"`) != want {
		t.Errorf("complete ETag %s, want %s", complete.ETag, want)
	}
	writeFile(t, filepath.Join(work, "whole"), whole)
	a.aws(s, "s3api", "get-object", "--bucket", "aws-mpu", "--key", "mp/obj", filepath.Join(work, "whole.got"))
	sameFile(t, filepath.Join(work, "whole"), filepath.Join(work, "whole.got"))

	// An aborted upload is gone, and completing it is NoSuchUpload.
	jsonOut(t, a.aws(s, "s3api", "create-multipart-upload", "--bucket", "aws-mpu", "--key", "mp/aborted"), &create)
	a.aws(s, "s3api", "upload-part", "--bucket", "aws-mpu", "--key", "mp/aborted", "--upload-id", create.UploadId,
		"--part-number", "1", "--body", filepath.Join(work, "part3"))
	a.aws(s, "s3api", "abort-multipart-upload", "--bucket", "aws-mpu", "--key", "mp/aborted", "--upload-id", create.UploadId)
	r := a.awsTry(s, "s3api", "complete-multipart-upload", "--bucket", "aws-mpu", "--key", "mp/aborted",
		"--upload-id", create.UploadId, "--multipart-upload", `{"Parts":[{"ETag":"x","PartNumber":1}]}`)
	awsServiceError(t, r, "NoSuchUpload")
	r = a.awsTry(s, "s3api", "head-object", "--bucket", "aws-mpu", "--key", "mp/aborted")
	if r.code == 0 || !strings.Contains(r.stderr, "404") {
		t.Errorf("aborted upload's key exists: %s", r)
	}
}

// testAWSPresign: a presigned URL works with curl; a tampered or expired one
// is refused with 403.
func testAWSPresign(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	curl := &tool{t: t, bin: needTool(t, "curl"), env: baseEnv(t.TempDir())}
	work := t.TempDir()
	a.aws(s, "s3", "mb", "s3://aws-presign")
	src := filepath.Join(work, "obj")
	writeRandomFile(t, src, 300_000, 5)
	a.aws(s, "s3", "cp", src, "s3://aws-presign/shared/obj file.bin")

	url := strings.TrimSpace(a.aws(s, "s3", "presign", "s3://aws-presign/shared/obj file.bin", "--expires-in", "300"))
	got := filepath.Join(work, "got")
	if code := curl.run("-s", "-o", got, "-w", "%{http_code}", url); code != "200" {
		t.Fatalf("curl of presigned URL: HTTP %s", code)
	}
	sameFile(t, src, got)

	// Change one hex digit of the signature; and, separately, point the
	// signed URL at another key.
	i := strings.Index(url, "Signature=") + len("Signature=")
	sig := url[i : i+1]
	flip := map[string]string{"0": "1"}[sig]
	if flip == "" {
		flip = "0"
	}
	tampered := url[:i] + flip + url[i+1:]
	otherKey := strings.Replace(url, "obj%20file.bin", "other.bin", 1)
	for name, u := range map[string]string{"signature": tampered, "key": otherKey} {
		body := filepath.Join(work, "err-"+name)
		code := curl.run("-s", "-o", body, "-w", "%{http_code}", u)
		b, _ := os.ReadFile(body)
		if code != "403" || !strings.Contains(string(b), "<Code>SignatureDoesNotMatch</Code>") {
			t.Errorf("tampered %s: HTTP %s %s, want 403 SignatureDoesNotMatch", name, code, b)
		}
	}
	if otherKey == url {
		t.Error("could not tamper with the key of the presigned URL")
	}

	expiring := strings.TrimSpace(a.aws(s, "s3", "presign", "s3://aws-presign/shared/obj file.bin", "--expires-in", "1"))
	// Valid for a second: refused once it has passed (the URL's clock is
	// the wall clock, so the test waits for that refusal, not for a time).
	body := filepath.Join(work, "err-expired")
	var code string
	var b []byte
	refused := func() bool {
		code = curl.run("-s", "-o", body, "-w", "%{http_code}", expiring)
		b, _ = os.ReadFile(body)
		return code == "403" && strings.Contains(string(b), "<Code>AccessDenied</Code>")
	}
	if !testutil.Eventually(10*time.Second, refused) {
		t.Errorf("expired presigned URL: HTTP %s %s, want 403 AccessDenied", code, b)
	}
}

// testAWSErrors: a wrong secret is SignatureDoesNotMatch, an unknown key
// InvalidAccessKeyId; missing keys and buckets are NoSuchKey/NoSuchBucket.
func testAWSErrors(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	a.aws(s, "s3", "mb", "s3://aws-errors")
	wrong := awsCLI(t, s, "not-the-secret")
	awsServiceError(t, wrong.awsTry(s, "s3api", "list-buckets"), "SignatureDoesNotMatch")
	awsServiceError(t, wrong.awsTry(s, "s3api", "list-objects-v2", "--bucket", "aws-errors"), "SignatureDoesNotMatch")
	r := wrong.awsTry(s, "s3", "ls", "s3://aws-errors/")
	if r.code == 0 || !strings.Contains(r.stderr, "SignatureDoesNotMatch") {
		t.Errorf("aws s3 ls with a wrong secret: %s", r)
	}

	out := filepath.Join(t.TempDir(), "out")
	awsServiceError(t, a.awsTry(s, "s3api", "get-object", "--bucket", "aws-errors", "--key", "missing", out), "NoSuchKey")
	awsServiceError(t, a.awsTry(s, "s3api", "get-object", "--bucket", "no-such-bucket-here", "--key", "k", out), "NoSuchBucket")
	awsServiceError(t, a.awsTry(s, "s3api", "list-objects-v2", "--bucket", "no-such-bucket-here"), "NoSuchBucket")
	awsServiceError(t, a.awsTry(s, "s3api", "create-bucket", "--bucket", "Bad_Bucket"), "InvalidBucketName")
	if r := a.awsTry(s, "s3", "cp", "s3://aws-errors/missing", out); r.code != 1 || !strings.Contains(r.stderr, "404") {
		t.Errorf("aws s3 cp of a missing key: %s; want exit 1 and a 404", r)
	}
	// A bucket with an object cannot be removed.
	writeFile(t, out, []byte("x"))
	a.aws(s, "s3", "cp", out, "s3://aws-errors/x")
	awsServiceError(t, a.awsTry(s, "s3api", "delete-bucket", "--bucket", "aws-errors"), "BucketNotEmpty")
}

// testAWSOddKeys: keys with spaces, '+', '%', unicode, and empty objects
// round-trip through put, list and get.
func testAWSOddKeys(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	a.aws(s, "s3", "mb", "s3://aws-odd")
	rng := rand.New(rand.NewPCG(6, 6))
	want := map[string][]byte{}
	for i, name := range append(oddNames, "dir/", "empty object") {
		key := "k/" + name
		var b []byte
		if !strings.HasSuffix(name, "/") && name != "empty object" {
			b = randomBytes(rng, 1000+i)
		}
		f := filepath.Join(work, fmt.Sprintf("in%d", i))
		writeFile(t, f, b)
		a.aws(s, "s3api", "put-object", "--bucket", "aws-odd", "--key", key, "--body", f)
		want[key] = b
	}
	var list struct {
		Contents []struct {
			Key  string
			Size int64
		}
	}
	jsonOut(t, a.aws(s, "s3api", "list-objects-v2", "--bucket", "aws-odd"), &list)
	got := map[string]int64{}
	for _, c := range list.Contents {
		got[c.Key] = c.Size
	}
	for k, b := range want {
		if sz, ok := got[k]; !ok || sz != int64(len(b)) {
			t.Errorf("list-objects-v2: key %q has size %d (listed %v), want %d", k, sz, ok, len(b))
		}
	}
	if len(got) != len(want) {
		t.Errorf("list-objects-v2 lists %d keys, want %d: %v", len(got), len(want), got)
	}
	// get-object the keys that need escaping in a URL; the high-level cp
	// below reads all the others.
	for _, k := range []string{"k/plus+sign.txt", "k/percent%20not-a-space.txt", "k/ünïcödé-文件-🦀.txt", "k/empty object"} {
		b := want[k]
		f := filepath.Join(work, "out")
		os.Remove(f)
		a.aws(s, "s3api", "get-object", "--bucket", "aws-odd", "--key", k, f)
		if g, err := os.ReadFile(f); err != nil || string(g) != string(b) {
			t.Errorf("get-object %q: %d bytes (%v), want %d", k, len(g), err, len(b))
		}
	}
	// The high-level commands encode keys their own way: cp a whole prefix down.
	down := filepath.Join(work, "down")
	a.aws(s, "s3", "cp", "--recursive", "s3://aws-odd/k/", down)
	for _, name := range oddNames {
		if g, err := os.ReadFile(filepath.Join(down, name)); err != nil || string(g) != string(want["k/"+name]) {
			t.Errorf("aws s3 cp --recursive: %q: %v", name, err)
		}
	}
}

// testAWSBigObject: a 1 GiB object (64 MiB with -short or KELP_TEST_LARGE=0) by the
// CLI's default multipart upload, downloaded and compared.
func testAWSBigObject(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	size := int64(64 << 20)
	if large() {
		size = 1 << 30
	}
	a.aws(s, "s3", "mb", "s3://aws-big")
	src := filepath.Join(work, "big")
	sum := writeRandomFile(t, src, size, 7)
	start := time.Now()
	a.aws(s, "s3", "cp", src, "s3://aws-big/big.bin")
	up := time.Since(start)
	got := filepath.Join(work, "got")
	start = time.Now()
	a.aws(s, "s3", "cp", "s3://aws-big/big.bin", got)
	down := time.Since(start)
	if g := fileSHA256(t, got); g != sum {
		t.Fatalf("%d-byte object differs after the round trip", size)
	}
	os.Remove(got)
	t.Logf("aws s3 cp of %d MiB: up %.1f s (%.0f MB/s), down %.1f s (%.0f MB/s)", size>>20,
		up.Seconds(), float64(size)/1e6/up.Seconds(), down.Seconds(), float64(size)/1e6/down.Seconds())
}

// boto3PostScript makes a bucket, has boto3 sign a browser upload form
// (generate_presigned_post, the SDK's Signature Version 4 form) limited to
// a key prefix and a size, posts a file with it as a browser would (curl's
// -F), then reads the object back and checks a post outside the policy is
// refused. argv: endpoint, access key, secret key, file.
const boto3PostScript = `
import boto3, botocore, hashlib, json, subprocess, sys
endpoint, ak, sk, path = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
                  region_name="us-east-1", config=botocore.config.Config(s3={"addressing_style": "path"}))
s3.create_bucket(Bucket="browser-uploads")
def post(key, limit):
    p = s3.generate_presigned_post("browser-uploads", "incoming/${filename}",
        Fields={"success_action_status": "201"},
        Conditions=[["starts-with", "$key", "incoming/"], {"success_action_status": "201"},
                    ["content-length-range", 1, limit]], ExpiresIn=300)
    args = ["curl", "-s", "-o", "/dev/stdout", "-w", "\\n%{http_code}"]
    for k, v in p["fields"].items():
        args += ["-F", k + "=" + (key if k == "key" else v)]
    args += ["-F", "file=@" + path, p["url"]]
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout
out = post("incoming/${filename}", 10 << 20)
if not out.endswith("\n201") or "<Key>incoming/" not in out:
    sys.exit("upload: " + out)
name = path.rsplit("/", 1)[-1]
got = s3.get_object(Bucket="browser-uploads", Key="incoming/" + name)["Body"].read()
want = open(path, "rb").read()
if hashlib.sha256(got).digest() != hashlib.sha256(want).digest():
    sys.exit("content differs")
out = post("incoming/${filename}", 10)
if not out.endswith("\n400") or "EntityTooLarge" not in out:
    sys.exit("oversized upload not refused: " + out)
print("ok")
`

// testBoto3PresignedPost: a browser-style form upload signed by boto3.
func testBoto3PresignedPost(t *testing.T, s *s3Server) {
	needTool(t, "curl")
	py := &tool{t: t, bin: needTool(t, "python3"), env: baseEnv(t.TempDir())}
	src := filepath.Join(t.TempDir(), "photo.jpg")
	writeRandomFile(t, src, 200_000, 9)
	if out := strings.TrimSpace(py.run("-c", boto3PostScript, s.endpoint, s3AccessKey, s3SecretKey, src)); out != "ok" {
		t.Fatalf("boto3 presigned post: %s", out)
	}
}

// testAWSPublicObject: `aws s3 cp --acl public-read` makes that object (and
// only it) readable by anybody, as a static site upload expects.
func testAWSPublicObject(t *testing.T, s *s3Server) {
	a := awsCLI(t, s, s3SecretKey)
	curl := &tool{t: t, bin: needTool(t, "curl"), env: baseEnv(t.TempDir())}
	work := t.TempDir()
	src := filepath.Join(work, "index.html")
	writeFile(t, src, []byte("<h1>hello</h1>"))
	a.aws(s, "s3", "mb", "s3://aws-site")
	a.aws(s, "s3", "cp", src, "s3://aws-site/index.html", "--acl", "public-read")
	a.aws(s, "s3", "cp", src, "s3://aws-site/private.html")
	got := filepath.Join(work, "got")
	if code := curl.run("-s", "-o", got, "-w", "%{http_code}", s.endpoint+"/aws-site/index.html"); code != "200" {
		t.Fatalf("anonymous GET of a public-read object: HTTP %s", code)
	}
	sameFile(t, src, got)
	if code := curl.run("-s", "-o", "/dev/null", "-w", "%{http_code}", s.endpoint+"/aws-site/private.html"); code != "403" {
		t.Fatalf("anonymous GET of a private object: HTTP %s", code)
	}
	if out := a.aws(s, "s3api", "get-object-acl", "--bucket", "aws-site", "--key", "index.html"); !strings.Contains(out, "AllUsers") {
		t.Fatalf("get-object-acl: %s", out)
	}
}
