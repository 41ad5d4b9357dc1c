package blackbox

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	lockAliceKey    = "ALICEAK000000000"
	lockAliceSecret = "alicesecret0000000000000000"
)

// TestS3ObjectLockAWSCLI drives object lock with the aws CLI as a user
// would: alice, an identity with Read, Write, List and Tagging (no Admin),
// locks versions with GOVERNANCE retention and legal holds in a bucket
// created with object lock; deleting a locked version needs the bypass,
// which does not lift a legal hold or COMPLIANCE retention.
func TestS3ObjectLockAWSCLI(t *testing.T) {
	dir := t.TempDir()
	ids := filepath.Join(dir, "ids.json")
	writeFile(t, ids, []byte(`{"identities": [{"name": "alice", "credentials": [{"accessKey": "`+lockAliceKey+
		`", "secretKey": "`+lockAliceSecret+`"}], "actions": ["Read", "Write", "List", "Tagging"]}]}`))
	var ports serverPorts
	p := startServer(t, filepath.Join(dir, "data"), &ports, "--s3.access-key="+s3AccessKey, "--s3.secret-key="+s3SecretKey, "--s3.config="+ids)
	s := &s3Server{proc: p, hostport: hostport(ports.s3)}
	s.endpoint = "http://" + s.hostport
	defer func() {
		if t.Failed() {
			t.Logf("server log (tail):\n%s", tail(p.log.String()))
		}
	}()
	admin := awsCLI(t, s, s3SecretKey)
	alice := awsCLI(t, s, lockAliceSecret)
	alice.env = append(alice.env, "AWS_ACCESS_KEY_ID="+lockAliceKey, "AWS_SECRET_ACCESS_KEY="+lockAliceSecret)
	body := filepath.Join(dir, "body")
	writeFile(t, body, []byte("keep me\n"))
	refused := func(r result, what string) {
		t.Helper()
		if r.code == 0 || !strings.Contains(r.stderr, "AccessDenied") {
			t.Fatalf("%s was not refused with AccessDenied: %s", what, r)
		}
	}
	var put struct{ VersionId string }

	// alice creates the bucket, and so owns it: she may bypass GOVERNANCE
	// retention in it without Admin.
	alice.aws(s, "s3api", "create-bucket", "--bucket", "alice-lock", "--object-lock-enabled-for-bucket")
	if out := alice.aws(s, "s3api", "get-bucket-versioning", "--bucket", "alice-lock"); !strings.Contains(out, "Enabled") {
		t.Fatalf("a bucket created with object lock is not versioned: %s", out)
	}
	if out := alice.aws(s, "s3api", "get-object-lock-configuration", "--bucket", "alice-lock"); !strings.Contains(out, `"ObjectLockEnabled": "Enabled"`) {
		t.Fatalf("get-object-lock-configuration: %s", out)
	}
	r := admin.awsTry(s, "s3api", "put-bucket-versioning", "--bucket", "alice-lock", "--versioning-configuration", "Status=Suspended")
	if r.code == 0 || !strings.Contains(r.stderr, "InvalidBucketState") {
		t.Fatalf("suspending versioning of a bucket with object lock: %s", r)
	}

	until := time.Now().UTC().Add(24 * time.Hour).Format("2006-01-02T15:04:05Z")
	jsonOut(t, alice.aws(s, "s3api", "put-object", "--bucket", "alice-lock", "--key", "l", "--body", body,
		"--object-lock-mode", "GOVERNANCE", "--object-lock-retain-until-date", until), &put)
	if put.VersionId == "" {
		t.Fatal("a PUT into a bucket with object lock gave no VersionId")
	}
	var head struct{ ObjectLockMode, ObjectLockRetainUntilDate string }
	jsonOut(t, alice.aws(s, "s3api", "head-object", "--bucket", "alice-lock", "--key", "l"), &head)
	if head.ObjectLockMode != "GOVERNANCE" || !strings.HasPrefix(head.ObjectLockRetainUntilDate, until[:19]) {
		t.Fatalf("head-object lock: %+v, want GOVERNANCE until %s", head, until)
	}
	refused(alice.awsTry(s, "s3api", "delete-object", "--bucket", "alice-lock", "--key", "l", "--version-id", put.VersionId),
		"deleting a version under GOVERNANCE retention without the bypass")
	alice.aws(s, "s3api", "delete-object", "--bucket", "alice-lock", "--key", "l", "--version-id", put.VersionId, "--bypass-governance-retention")
	if r := alice.awsTry(s, "s3api", "head-object", "--bucket", "alice-lock", "--key", "l", "--version-id", put.VersionId); r.code == 0 {
		t.Fatal("the version is still there after the bypassing delete")
	}

	jsonOut(t, alice.aws(s, "s3api", "put-object", "--bucket", "alice-lock", "--key", "h", "--body", body,
		"--object-lock-legal-hold-status", "ON"), &put)
	refused(alice.awsTry(s, "s3api", "delete-object", "--bucket", "alice-lock", "--key", "h", "--version-id", put.VersionId,
		"--bypass-governance-retention"), "deleting a version under legal hold")
	if out := alice.aws(s, "s3api", "get-object-legal-hold", "--bucket", "alice-lock", "--key", "h"); !strings.Contains(out, `"ON"`) {
		t.Fatalf("get-object-legal-hold: %s", out)
	}
	alice.aws(s, "s3api", "put-object-legal-hold", "--bucket", "alice-lock", "--key", "h", "--legal-hold", "Status=OFF")
	alice.aws(s, "s3api", "delete-object", "--bucket", "alice-lock", "--key", "h", "--version-id", put.VersionId)

	// Default retention: COMPLIANCE for a day, which nobody can bypass.
	admin.aws(s, "s3api", "put-object-lock-configuration", "--bucket", "alice-lock", "--object-lock-configuration",
		`{"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "COMPLIANCE", "Days": 1}}}`)
	jsonOut(t, alice.aws(s, "s3api", "put-object", "--bucket", "alice-lock", "--key", "c", "--body", body), &put)
	if out := alice.aws(s, "s3api", "get-object-retention", "--bucket", "alice-lock", "--key", "c"); !strings.Contains(out, "COMPLIANCE") {
		t.Fatalf("get-object-retention of a version under the default retention: %s", out)
	}
	refused(admin.awsTry(s, "s3api", "delete-object", "--bucket", "alice-lock", "--key", "c", "--version-id", put.VersionId,
		"--bypass-governance-retention"), "deleting a version under COMPLIANCE retention")
	refused(admin.awsTry(s, "s3api", "put-object-retention", "--bucket", "alice-lock", "--key", "c", "--version-id", put.VersionId,
		"--retention", `{"Mode": "GOVERNANCE", "RetainUntilDate": "`+until+`"}`, "--bypass-governance-retention"),
		"weakening COMPLIANCE retention")
	// A delete without a version id only adds a delete marker.
	alice.aws(s, "s3api", "delete-object", "--bucket", "alice-lock", "--key", "c")
	alice.aws(s, "s3api", "head-object", "--bucket", "alice-lock", "--key", "c", "--version-id", put.VersionId)
}
