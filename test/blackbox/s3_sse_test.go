package blackbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3EncryptionAWSCLI drives server-side encryption with the aws CLI
// against a plain `kelp server` (no KMS options: it generates its master
// key), manages keys with `kelp kms` while the server runs, and checks that
// no plaintext of an encrypted object is anywhere under the data directory.
func TestS3EncryptionAWSCLI(t *testing.T) {
	dir := t.TempDir()
	var ports serverPorts
	p := startServer(t, dir, &ports, "--s3.access-key="+s3AccessKey, "--s3.secret-key="+s3SecretKey)
	s := &s3Server{proc: p, hostport: hostport(ports.s3)}
	s.endpoint = "http://" + s.hostport
	defer func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", tail(p.log.String()))
		}
	}()
	masterKey := filepath.Join(dir, "kms", "master.key")
	if st, err := os.Stat(masterKey); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("master key file %s: %v (want mode 0600)", masterKey, err)
	}
	if !strings.Contains(p.log.String(), masterKey) {
		t.Errorf("the server does not say where its master key is:\n%s", p.log.String())
	}

	a := awsCLI(t, s, s3SecretKey)
	work := t.TempDir()
	a.aws(s, "s3api", "create-bucket", "--bucket", "enc")
	var marker [12]byte
	rand.Read(marker[:])
	secret := "ssec-plaintext-" + hex.EncodeToString(marker[:])
	small := filepath.Join(work, "small")
	writeFile(t, small, []byte(strings.Repeat(secret+"\n", 100)))
	customerKey := strings.Repeat("k", 16) + hex.EncodeToString(marker[:8]) // 32 bytes; the CLI encodes it and adds its MD5

	// SSE-C: round trip, refused without the key or with another one.
	a.aws(s, "s3api", "put-object", "--bucket", "enc", "--key", "ssec", "--body", small,
		"--sse-customer-algorithm", "AES256", "--sse-customer-key", customerKey)
	awsServiceError(t, a.awsTry(s, "s3api", "get-object", "--bucket", "enc", "--key", "ssec", filepath.Join(work, "x")), "InvalidRequest")
	r := a.awsTry(s, "s3api", "get-object", "--bucket", "enc", "--key", "ssec", "--sse-customer-algorithm", "AES256",
		"--sse-customer-key", strings.Repeat("w", 32), filepath.Join(work, "x"))
	awsServiceError(t, r, "AccessDenied")
	out := a.aws(s, "s3api", "get-object", "--bucket", "enc", "--key", "ssec", "--sse-customer-algorithm", "AES256",
		"--sse-customer-key", customerKey, filepath.Join(work, "ssec.got"))
	sameFile(t, small, filepath.Join(work, "ssec.got"))
	if !strings.Contains(out, `"SSECustomerAlgorithm": "AES256"`) {
		t.Errorf("get-object does not report SSECustomerAlgorithm:\n%s", out)
	}
	// A multipart SSE-C upload through the high-level commands (9 MiB: the
	// CLI's threshold is 8 MiB).
	big := filepath.Join(work, "big")
	writeFile(t, big, bytes.Repeat([]byte(secret+"-big\n"), 9<<20/len(secret)))
	a.aws(s, "s3", "cp", big, "s3://enc/big", "--sse-c", "AES256", "--sse-c-key", customerKey)
	a.aws(s, "s3", "cp", "s3://enc/big", filepath.Join(work, "big.got"), "--sse-c", "AES256", "--sse-c-key", customerKey)
	sameFile(t, big, filepath.Join(work, "big.got"))

	// SSE-S3 and SSE-KMS with the default key.
	out = a.aws(s, "s3api", "put-object", "--bucket", "enc", "--key", "sses3", "--body", small, "--server-side-encryption", "AES256")
	if !strings.Contains(out, `"ServerSideEncryption": "AES256"`) {
		t.Errorf("SSE-S3 put-object answer:\n%s", out)
	}
	out = a.aws(s, "s3api", "put-object", "--bucket", "enc", "--key", "kms", "--body", small, "--server-side-encryption", "aws:kms")
	if !strings.Contains(out, `"ServerSideEncryption": "aws:kms"`) || !strings.Contains(out, "SSEKMSKeyId") {
		t.Errorf("SSE-KMS put-object answer:\n%s", out)
	}
	out = a.aws(s, "s3api", "get-object", "--bucket", "enc", "--key", "kms", filepath.Join(work, "kms.got"))
	sameFile(t, small, filepath.Join(work, "kms.got"))
	if !strings.Contains(out, `"ServerSideEncryption": "aws:kms"`) {
		t.Errorf("SSE-KMS get-object answer:\n%s", out)
	}

	// kelp kms: a named key, used, disabled (reads refused), enabled again.
	kelp := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(kelpBin, append(args, "--dir="+dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kelp %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}
	kelp("kms", "create", "--alias", "app", "--description", "black-box key")
	if list := kelp("kms", "list"); !strings.Contains(list, "alias/app") || !strings.Contains(list, "alias/aws/s3") {
		t.Errorf("kelp kms list:\n%s", list)
	}
	a.aws(s, "s3api", "put-object", "--bucket", "enc", "--key", "app", "--body", small,
		"--server-side-encryption", "aws:kms", "--ssekms-key-id", "alias/app")
	kelp("kms", "disable", "alias/app")
	awsServiceError(t, a.awsTry(s, "s3api", "get-object", "--bucket", "enc", "--key", "app", filepath.Join(work, "x")), "KMS.DisabledException")
	kelp("kms", "enable", "alias/app")
	a.aws(s, "s3api", "get-object", "--bucket", "enc", "--key", "app", filepath.Join(work, "app.got"))
	sameFile(t, small, filepath.Join(work, "app.got"))
	awsServiceError(t, a.awsTry(s, "s3api", "put-object", "--bucket", "enc", "--key", "nokey", "--body", small,
		"--server-side-encryption", "aws:kms", "--ssekms-key-id", "alias/none"), "KMS.NotFoundException")

	// No plaintext anywhere under the data directory: volumes, filer
	// store and its log.
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil // removed meanwhile (a compaction)
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("the plaintext of an encrypted object is in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
