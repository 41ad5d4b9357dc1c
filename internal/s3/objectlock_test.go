package s3

import (
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

const (
	aliceAK = "AKALICE"
	aliceSK = "alice-secret-0123456789"
	carolAK = "AKCAROL" // no actions of her own: only what a bucket policy grants
	carolSK = "carol-secret-0123456789"
)

// lockEnv is a gateway with alice (Read, Write, List, Tagging: no Admin),
// carol (nothing of her own) and a clock the test can move forward (by
// less than the signature's allowed skew).
type lockEnv struct {
	*env
	alice, carol *s3.Client
	skew         atomic.Int64
}

func startLockEnv(t *testing.T) *lockEnv {
	le := &lockEnv{}
	le.env = startEnv(t, func(c *Config) {
		c.Identities = append(c.Identities,
			Identity{Name: "alice", Credentials: []Credential{{aliceAK, aliceSK}}, Actions: []string{"Read", "Write", "List", "Tagging"}},
			Identity{Name: "carol", Credentials: []Credential{{carolAK, carolSK}}})
		c.Now = func() time.Time { return time.Now().Add(time.Duration(le.skew.Load())) }
	})
	le.alice = le.client(aliceAK, aliceSK)
	le.carol = le.client(carolAK, carolSK)
	return le
}

// mkLockBucket creates a bucket with object lock owned by alice (a
// non-Admin identity), as in the acceptance check.
func (le *lockEnv) mkLockBucket(name string) {
	le.t.Helper()
	_, err := le.alice.CreateBucket(le.ctx, &s3.CreateBucketInput{Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(true)})
	if err != nil {
		le.t.Fatalf("create bucket %s with object lock: %v", name, err)
	}
}

// putLocked puts key with the given retention (mode "" none) and legal
// hold through c and returns the version id.
func (le *lockEnv) putLocked(c *s3.Client, bucket, key string, mode types.ObjectLockMode, until time.Time, hold bool) string {
	le.t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("locked " + key)}
	if mode != "" {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = mode, aws.Time(until)
	}
	if hold {
		in.ObjectLockLegalHoldStatus = types.ObjectLockLegalHoldStatusOn
	}
	out, err := c.PutObject(le.ctx, in)
	if err != nil {
		le.t.Fatalf("put %s with lock: %v", key, err)
	}
	if aws.ToString(out.VersionId) == "" {
		le.t.Fatalf("put %s in a bucket with object lock gave no version id", key)
	}
	return aws.ToString(out.VersionId)
}

func (le *lockEnv) deleteVersion(c *s3.Client, bucket, key, vid string, bypass bool) error {
	in := &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(vid)}
	if bypass {
		in.BypassGovernanceRetention = aws.Bool(true)
	}
	_, err := c.DeleteObject(le.ctx, in)
	return err
}

// versionExists reports whether version vid of key can be read.
func (le *lockEnv) versionExists(bucket, key, vid string) bool {
	le.t.Helper()
	_, err := le.c.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(vid)})
	return err == nil
}

func TestObjectLockBucketConfiguration(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("locked")
	v, err := le.c.GetBucketVersioning(le.ctx, &s3.GetBucketVersioningInput{Bucket: aws.String("locked")})
	if err != nil || v.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("versioning of a bucket created with object lock: %v %v", v, err)
	}
	cfg, err := le.c.GetObjectLockConfiguration(le.ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("locked")})
	if err != nil || cfg.ObjectLockConfiguration.ObjectLockEnabled != types.ObjectLockEnabledEnabled || cfg.ObjectLockConfiguration.Rule != nil {
		t.Fatalf("object lock configuration: %+v %v", cfg, err)
	}
	_, err = le.c.PutBucketVersioning(le.ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("locked"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	le.wantCode(err, "InvalidBucketState")

	// Default retention: put, read back, refuse malformed ones.
	rule := func(mode types.ObjectLockRetentionMode, days, years int32) *types.ObjectLockConfiguration {
		d := &types.DefaultRetention{Mode: mode}
		if days != 0 {
			d.Days = aws.Int32(days)
		}
		if years != 0 {
			d.Years = aws.Int32(years)
		}
		return &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{DefaultRetention: d}}
	}
	putCfg := func(bucket string, c *types.ObjectLockConfiguration) error {
		_, err := le.c.PutObjectLockConfiguration(le.ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String(bucket), ObjectLockConfiguration: c})
		return err
	}
	if err := putCfg("locked", rule(types.ObjectLockRetentionModeCompliance, 0, 2)); err != nil {
		t.Fatal(err)
	}
	cfg, err = le.c.GetObjectLockConfiguration(le.ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("locked")})
	if err != nil || cfg.ObjectLockConfiguration.Rule == nil || cfg.ObjectLockConfiguration.Rule.DefaultRetention.Mode != types.ObjectLockRetentionModeCompliance ||
		aws.ToInt32(cfg.ObjectLockConfiguration.Rule.DefaultRetention.Years) != 2 {
		t.Fatalf("default retention read back: %+v %v", cfg, err)
	}
	le.wantCode(putCfg("locked", rule(types.ObjectLockRetentionModeGovernance, 1, 1)), "MalformedXML")
	le.wantCode(putCfg("locked", rule(types.ObjectLockRetentionModeGovernance, -1, 0)), "InvalidArgument")
	le.wantCode(putCfg("locked", rule("SOMETIMES", 1, 0)), "MalformedXML")
	le.wantCode(putCfg("locked", &types.ObjectLockConfiguration{}), "MalformedXML")
	// A configuration without a rule removes the default retention.
	if err := putCfg("locked", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}); err != nil {
		t.Fatal(err)
	}
	cfg, err = le.c.GetObjectLockConfiguration(le.ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("locked")})
	if err != nil || cfg.ObjectLockConfiguration.Rule != nil {
		t.Fatalf("default retention not removed: %+v %v", cfg, err)
	}

	// A bucket without object lock: none to read, lock headers refused,
	// and lock can be turned on once versioning is Enabled.
	le.mkBucket("plain")
	_, err = le.c.GetObjectLockConfiguration(le.ctx, &s3.GetObjectLockConfigurationInput{Bucket: aws.String("plain")})
	le.wantCode(err, "ObjectLockConfigurationNotFoundError")
	_, err = le.c.PutObject(le.ctx, &s3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("k"), Body: strings.NewReader("x"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	le.wantCode(err, "InvalidRequest")
	_, err = le.c.PutObjectLegalHold(le.ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String("plain"), Key: aws.String("k"),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	le.wantCode(err, "InvalidRequest")
	le.wantCode(putCfg("plain", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}), "InvalidBucketState")
	le.enableVersioning("plain", types.BucketVersioningStatusEnabled)
	if err := putCfg("plain", rule(types.ObjectLockRetentionModeGovernance, 1, 0)); err != nil {
		t.Fatalf("object lock on an existing versioned bucket: %v", err)
	}
	_, err = le.c.PutBucketVersioning(le.ctx, &s3.PutBucketVersioningInput{Bucket: aws.String("plain"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	le.wantCode(err, "InvalidBucketState")
}

// The acceptance scenario: alice (Write, no Admin) puts a version under
// GOVERNANCE retention; deleting it needs the bypass, which she holds.
func TestObjectLockGovernance(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("gov")
	until := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	vid := le.putLocked(le.alice, "gov", "l", types.ObjectLockModeGovernance, until, false)

	head, err := le.alice.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String("gov"), Key: aws.String("l")})
	if err != nil || head.ObjectLockMode != types.ObjectLockModeGovernance || !aws.ToTime(head.ObjectLockRetainUntilDate).Equal(until) {
		t.Fatalf("HEAD lock headers: mode %q until %v (want %v), err %v", head.ObjectLockMode, aws.ToTime(head.ObjectLockRetainUntilDate), until, err)
	}
	ret, err := le.alice.GetObjectRetention(le.ctx, &s3.GetObjectRetentionInput{Bucket: aws.String("gov"), Key: aws.String("l"), VersionId: aws.String(vid)})
	if err != nil || ret.Retention.Mode != types.ObjectLockRetentionModeGovernance || !aws.ToTime(ret.Retention.RetainUntilDate).Equal(until) {
		t.Fatalf("GetObjectRetention: %+v %v", ret, err)
	}

	le.wantCode(le.deleteVersion(le.alice, "gov", "l", vid, false), "AccessDenied")
	// Without a version id a delete marker is added: allowed.
	dm, err := le.alice.DeleteObject(le.ctx, &s3.DeleteObjectInput{Bucket: aws.String("gov"), Key: aws.String("l")})
	if err != nil || !aws.ToBool(dm.DeleteMarker) {
		t.Fatalf("delete marker over a locked version: %+v %v", dm, err)
	}
	if !le.versionExists("gov", "l", vid) {
		t.Fatal("the locked version is gone")
	}
	if err := le.deleteVersion(le.alice, "gov", "l", vid, true); err != nil {
		t.Fatalf("delete with the bypass by alice: %v", err)
	}
	if le.versionExists("gov", "l", vid) {
		t.Fatal("the version survived a bypassing delete")
	}

	// An expired retention protects nothing.
	vid = le.putLocked(le.alice, "gov", "soon", types.ObjectLockModeCompliance, time.Now().Add(30*time.Second), false)
	le.wantCode(le.deleteVersion(le.c, "gov", "soon", vid, true), "AccessDenied")
	le.skew.Store(int64(time.Minute))
	if err := le.deleteVersion(le.alice, "gov", "soon", vid, false); err != nil {
		t.Fatalf("delete after the retention ended: %v", err)
	}
}

// The bypass is s3:BypassGovernanceRetention, decided by authorize: carol
// may delete versions through a policy, but bypass only once the policy
// grants that too; a Deny takes it from alice.
func TestObjectLockBypassPermission(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("perm")
	until := time.Now().Add(time.Hour)
	policy := func(actions string, deny string) {
		t.Helper()
		doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["carol"]},"Action":[` + actions + `],"Resource":["arn:aws:s3:::perm/*"]}`
		if deny != "" {
			doc += `,{"Effect":"Deny","Principal":{"AWS":["alice"]},"Action":["` + deny + `"],"Resource":["arn:aws:s3:::perm/*"]}`
		}
		doc += `]}`
		if _, err := le.c.PutBucketPolicy(le.ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("perm"), Policy: aws.String(doc)}); err != nil {
			t.Fatal(err)
		}
	}
	policy(`"s3:DeleteObjectVersion","s3:PutObjectRetention"`, "")
	vid := le.putLocked(le.c, "perm", "k", types.ObjectLockModeGovernance, until, false)
	le.wantCode(le.deleteVersion(le.carol, "perm", "k", vid, true), "AccessDenied")
	_, err := le.carol.PutObjectRetention(le.ctx, &s3.PutObjectRetentionInput{Bucket: aws.String("perm"), Key: aws.String("k"),
		VersionId: aws.String(vid), Retention: &types.ObjectLockRetention{}, BypassGovernanceRetention: aws.Bool(true)})
	le.wantCode(err, "AccessDenied")
	policy(`"s3:DeleteObjectVersion","s3:BypassGovernanceRetention"`, "s3:BypassGovernanceRetention")
	if err := le.deleteVersion(le.carol, "perm", "k", vid, true); err != nil {
		t.Fatalf("carol, granted the bypass by the policy: %v", err)
	}
	vid = le.putLocked(le.c, "perm", "k2", types.ObjectLockModeGovernance, until, false)
	le.wantCode(le.deleteVersion(le.alice, "perm", "k2", vid, true), "AccessDenied") // denied by the policy
	if err := le.deleteVersion(le.c, "perm", "k2", vid, true); err != nil {
		t.Fatalf("admin bypass: %v", err)
	}
}

func TestObjectLockRetentionChanges(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("ret")
	now := time.Now().Truncate(time.Second)
	put := func(vid string, mode types.ObjectLockRetentionMode, until time.Time, bypass bool) error {
		in := &s3.PutObjectRetentionInput{Bucket: aws.String("ret"), Key: aws.String("k"), VersionId: aws.String(vid),
			Retention: &types.ObjectLockRetention{}}
		if mode != "" {
			in.Retention = &types.ObjectLockRetention{Mode: mode, RetainUntilDate: aws.Time(until)}
		}
		if bypass {
			in.BypassGovernanceRetention = aws.Bool(true)
		}
		_, err := le.c.PutObjectRetention(le.ctx, in)
		return err
	}
	get := func(vid string) (types.ObjectLockRetentionMode, time.Time) {
		out, err := le.c.GetObjectRetention(le.ctx, &s3.GetObjectRetentionInput{Bucket: aws.String("ret"), Key: aws.String("k"), VersionId: aws.String(vid)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Retention.Mode, aws.ToTime(out.Retention.RetainUntilDate)
	}
	gov, comp := types.ObjectLockRetentionModeGovernance, types.ObjectLockRetentionModeCompliance

	vid := le.putLocked(le.c, "ret", "k", "", time.Time{}, false)
	_, err := le.c.GetObjectRetention(le.ctx, &s3.GetObjectRetentionInput{Bucket: aws.String("ret"), Key: aws.String("k")})
	le.wantCode(err, "NoSuchObjectLockConfiguration")
	le.wantCode(put(vid, gov, now.Add(-time.Hour), false), "InvalidArgument") // in the past
	if err := put(vid, gov, now.Add(2*time.Hour), false); err != nil {
		t.Fatal(err)
	}
	le.wantCode(put(vid, gov, now.Add(time.Hour), false), "AccessDenied") // shorten
	if err := put(vid, gov, now.Add(3*time.Hour), false); err != nil {    // extend
		t.Fatalf("extending GOVERNANCE: %v", err)
	}
	if err := put(vid, gov, now.Add(time.Hour), true); err != nil {
		t.Fatalf("shortening GOVERNANCE with the bypass: %v", err)
	}
	if m, u := get(vid); m != gov || !u.Equal(now.Add(time.Hour)) {
		t.Fatalf("retention %s %v, want GOVERNANCE %v", m, u, now.Add(time.Hour))
	}
	le.wantCode(put(vid, comp, now.Add(5*time.Hour), false), "AccessDenied") // another mode
	le.wantCode(put(vid, "", time.Time{}, false), "AccessDenied")            // remove
	if err := put(vid, "", time.Time{}, true); err != nil {
		t.Fatalf("removing GOVERNANCE with the bypass: %v", err)
	}
	if err := put(vid, comp, now.Add(2*time.Hour), false); err != nil {
		t.Fatal(err)
	}
	// COMPLIANCE: extended yes; shortened, removed or weakened never, not
	// even by an Admin with the bypass.
	if err := put(vid, comp, now.Add(4*time.Hour), false); err != nil {
		t.Fatalf("extending COMPLIANCE: %v", err)
	}
	le.wantCode(put(vid, comp, now.Add(3*time.Hour), true), "AccessDenied")
	le.wantCode(put(vid, gov, now.Add(5*time.Hour), true), "AccessDenied")
	le.wantCode(put(vid, "", time.Time{}, true), "AccessDenied")
	le.wantCode(le.deleteVersion(le.c, "ret", "k", vid, true), "AccessDenied")
	if m, u := get(vid); m != comp || !u.Equal(now.Add(4*time.Hour)) {
		t.Fatalf("retention %s %v, want COMPLIANCE %v", m, u, now.Add(4*time.Hour))
	}
	// Retention of a noncurrent version, and of a delete marker (405).
	vid2 := le.putLocked(le.c, "ret", "k", "", time.Time{}, false)
	if m, _ := get(vid); m != comp {
		t.Fatalf("noncurrent version's retention %q", m)
	}
	if err := put(vid2, gov, now.Add(time.Hour), false); err != nil {
		t.Fatal(err)
	}
	dm, err := le.c.DeleteObject(le.ctx, &s3.DeleteObjectInput{Bucket: aws.String("ret"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	le.wantCode(put(aws.ToString(dm.VersionId), gov, now.Add(time.Hour), false), "MethodNotAllowed")
}

func TestObjectLockLegalHold(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("hold")
	vid := le.putLocked(le.alice, "hold", "h", "", time.Time{}, true)
	le.wantCode(le.deleteVersion(le.alice, "hold", "h", vid, true), "AccessDenied")
	le.wantCode(le.deleteVersion(le.c, "hold", "h", vid, true), "AccessDenied")
	get, err := le.alice.GetObject(le.ctx, &s3.GetObjectInput{Bucket: aws.String("hold"), Key: aws.String("h")})
	if err != nil || get.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn {
		t.Fatalf("GET legal hold header: %q %v", get.ObjectLockLegalHoldStatus, err)
	}
	get.Body.Close()
	setHold := func(vid string, on bool) {
		t.Helper()
		st := types.ObjectLockLegalHoldStatusOff
		if on {
			st = types.ObjectLockLegalHoldStatusOn
		}
		_, err := le.alice.PutObjectLegalHold(le.ctx, &s3.PutObjectLegalHoldInput{Bucket: aws.String("hold"), Key: aws.String("h"),
			VersionId: aws.String(vid), LegalHold: &types.ObjectLockLegalHold{Status: st}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := le.alice.GetObjectLegalHold(le.ctx, &s3.GetObjectLegalHoldInput{Bucket: aws.String("hold"), Key: aws.String("h"), VersionId: aws.String(vid)})
		if err != nil || out.LegalHold.Status != st {
			t.Fatalf("legal hold read back: %+v %v, want %s", out, err, st)
		}
	}
	setHold(vid, false)
	if err := le.deleteVersion(le.alice, "hold", "h", vid, false); err != nil {
		t.Fatalf("delete after the hold was lifted: %v", err)
	}
	// A hold put on a version that is already noncurrent protects it.
	v1 := le.putLocked(le.alice, "hold", "h", "", time.Time{}, false)
	le.putLocked(le.alice, "hold", "h", "", time.Time{}, false)
	setHold(v1, true)
	le.wantCode(le.deleteVersion(le.c, "hold", "h", v1, true), "AccessDenied")
	if !le.versionExists("hold", "h", v1) {
		t.Fatal("held version gone")
	}
}

func TestObjectLockDefaultRetention(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("def")
	_, err := le.c.PutObjectLockConfiguration(le.ctx, &s3.PutObjectLockConfigurationInput{Bucket: aws.String("def"),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(24 * time.Hour).Add(-time.Second)
	vid := le.putV("def", "d", "default")
	head, err := le.c.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String("def"), Key: aws.String("d")})
	if err != nil || head.ObjectLockMode != types.ObjectLockModeGovernance || aws.ToTime(head.ObjectLockRetainUntilDate).Before(before) ||
		aws.ToTime(head.ObjectLockRetainUntilDate).After(time.Now().Add(24*time.Hour+time.Second)) {
		t.Fatalf("default retention of a new version: %q %v %v", head.ObjectLockMode, aws.ToTime(head.ObjectLockRetainUntilDate), err)
	}
	le.wantCode(le.deleteVersion(le.alice, "def", "d", vid, false), "AccessDenied")
	// An explicit retention wins over the default.
	until := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	le.putLocked(le.c, "def", "e", types.ObjectLockModeCompliance, until, false)
	head, err = le.c.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String("def"), Key: aws.String("e")})
	if err != nil || head.ObjectLockMode != types.ObjectLockModeCompliance || !aws.ToTime(head.ObjectLockRetainUntilDate).Equal(until) {
		t.Fatalf("explicit retention: %q %v %v", head.ObjectLockMode, aws.ToTime(head.ObjectLockRetainUntilDate), err)
	}
}

func TestObjectLockDeleteObjects(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("multi")
	until := time.Now().Add(time.Hour)
	locked := le.putLocked(le.c, "multi", "locked", types.ObjectLockModeGovernance, until, false)
	held := le.putLocked(le.c, "multi", "held", "", time.Time{}, true)
	free := le.putLocked(le.c, "multi", "free", "", time.Time{}, false)
	del := func(bypass bool, ids ...[2]string) *s3.DeleteObjectsOutput {
		in := &s3.DeleteObjectsInput{Bucket: aws.String("multi"), Delete: &types.Delete{}}
		for _, id := range ids {
			in.Delete.Objects = append(in.Delete.Objects, types.ObjectIdentifier{Key: aws.String(id[0]), VersionId: aws.String(id[1])})
		}
		if bypass {
			in.BypassGovernanceRetention = aws.Bool(true)
		}
		out, err := le.alice.DeleteObjects(le.ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	refused := func(out *s3.DeleteObjectsOutput) string {
		var s []string
		for _, e := range out.Errors {
			s = append(s, aws.ToString(e.Key)+":"+aws.ToString(e.Code))
		}
		return strings.Join(s, " ")
	}
	out := del(false, [2]string{"locked", locked}, [2]string{"held", held}, [2]string{"free", free})
	if got := refused(out); got != "locked:AccessDenied held:AccessDenied" || len(out.Deleted) != 1 {
		t.Fatalf("DeleteObjects without bypass: refused %q, deleted %d", got, len(out.Deleted))
	}
	out = del(true, [2]string{"locked", locked}, [2]string{"held", held})
	if got := refused(out); got != "held:AccessDenied" || len(out.Deleted) != 1 {
		t.Fatalf("DeleteObjects with bypass: refused %q, deleted %d", got, len(out.Deleted))
	}
	if le.versionExists("multi", "locked", locked) || !le.versionExists("multi", "held", held) {
		t.Fatal("DeleteObjects deleted the wrong versions")
	}
	// Without version ids, delete markers: allowed.
	out = del(false, [2]string{"held", ""})
	if len(out.Errors) != 0 || len(out.Deleted) != 1 || !aws.ToBool(out.Deleted[0].DeleteMarker) {
		t.Fatalf("delete marker through DeleteObjects: %s", refused(out))
	}
}

func TestObjectLockMultipartAndCopy(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("mpu")
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	old := le.putLocked(le.c, "mpu", "big", types.ObjectLockModeGovernance, until, false)
	cr, err := le.alice.CreateMultipartUpload(le.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("mpu"), Key: aws.String("big"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(until), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	if err != nil {
		t.Fatal(err)
	}
	part, err := le.alice.UploadPart(le.ctx, &s3.UploadPartInput{Bucket: aws.String("mpu"), Key: aws.String("big"), UploadId: cr.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("one part")})
	if err != nil {
		t.Fatal(err)
	}
	done, err := le.alice.CompleteMultipartUpload(le.ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String("mpu"), Key: aws.String("big"),
		UploadId: cr.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}})
	if err != nil {
		t.Fatal(err)
	}
	nv := aws.ToString(done.VersionId)
	if !le.versionExists("mpu", "big", old) {
		t.Fatal("completing an upload over a locked version destroyed it")
	}
	head, err := le.c.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String("mpu"), Key: aws.String("big"), VersionId: aws.String(nv)})
	if err != nil || head.ObjectLockMode != types.ObjectLockModeCompliance || head.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn ||
		!aws.ToTime(head.ObjectLockRetainUntilDate).Equal(until) {
		t.Fatalf("completed upload's lock: %q %q %v %v", head.ObjectLockMode, head.ObjectLockLegalHoldStatus, aws.ToTime(head.ObjectLockRetainUntilDate), err)
	}
	le.wantCode(le.deleteVersion(le.c, "mpu", "big", nv, true), "AccessDenied")

	// Copies take the lock of their own headers, never the source's.
	cp, err := le.c.CopyObject(le.ctx, &s3.CopyObjectInput{Bucket: aws.String("mpu"), Key: aws.String("copy"), CopySource: aws.String("mpu/big")})
	if err != nil {
		t.Fatal(err)
	}
	if err := le.deleteVersion(le.c, "mpu", "copy", aws.ToString(cp.VersionId), false); err != nil {
		t.Fatalf("a copy inherited its source's lock: %v", err)
	}
	cp, err = le.c.CopyObject(le.ctx, &s3.CopyObjectInput{Bucket: aws.String("mpu"), Key: aws.String("copy"), CopySource: aws.String("mpu/big"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(until)})
	if err != nil {
		t.Fatal(err)
	}
	le.wantCode(le.deleteVersion(le.c, "mpu", "copy", aws.ToString(cp.VersionId), false), "AccessDenied")

	// Lock headers on an upload into a bucket without object lock.
	le.mkBucket("plain")
	_, err = le.c.CreateMultipartUpload(le.ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String("plain"), Key: aws.String("k"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(until)})
	le.wantCode(err, "InvalidRequest")
	_, err = le.c.CopyObject(le.ctx, &s3.CopyObjectInput{Bucket: aws.String("plain"), Key: aws.String("k"), CopySource: aws.String("mpu/big"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	le.wantCode(err, "InvalidRequest")
}

// Lifecycle: noncurrent expiration skips locked versions; expiring a locked
// current version only adds a delete marker.
func TestObjectLockLifecycle(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("lcy")
	until := time.Now().Add(time.Hour)
	locked := le.putLocked(le.c, "lcy", "a", types.ObjectLockModeCompliance, until, false)
	free := le.putLocked(le.c, "lcy", "b", "", time.Time{}, false)
	le.putV("lcy", "a", "new a")
	le.putV("lcy", "b", "new b")
	cur := le.putLocked(le.c, "lcy", "c", "", time.Time{}, true)
	_, err := le.c.PutBucketLifecycleConfiguration(le.ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: aws.String("lcy"),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
			ID: aws.String("r"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)},
			Expiration:                  &types.LifecycleExpiration{Days: aws.Int32(1)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := le.gw.layer.ApplyLifecycle(le.ctx, time.Now().Add(3*24*time.Hour)); err != nil {
		t.Fatalf("lifecycle run: %v", err)
	}
	if !le.versionExists("lcy", "a", locked) || !le.versionExists("lcy", "c", cur) {
		t.Fatal("lifecycle removed a locked version")
	}
	if le.versionExists("lcy", "b", free) {
		t.Fatal("lifecycle kept an unlocked noncurrent version")
	}
	_, err = le.c.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String("lcy"), Key: aws.String("c")})
	le.wantCode(err, "NotFound") // the expired current version is behind a delete marker
}

// Directory objects ("d/") keep no versions: a locked one can be neither
// deleted nor replaced.
func TestObjectLockDirectoryObject(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("dirs")
	_, err := le.c.PutObject(le.ctx, &s3.PutObjectInput{Bucket: aws.String("dirs"), Key: aws.String("d/"), Body: strings.NewReader("x"),
		ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	if err != nil {
		t.Fatal(err)
	}
	_, err = le.c.DeleteObject(le.ctx, &s3.DeleteObjectInput{Bucket: aws.String("dirs"), Key: aws.String("d/")})
	le.wantCode(err, "AccessDenied")
	_, err = le.c.PutObject(le.ctx, &s3.PutObjectInput{Bucket: aws.String("dirs"), Key: aws.String("d/"), Body: strings.NewReader("x")})
	le.wantCode(err, "AccessDenied")
	if _, err := le.c.HeadObject(le.ctx, &s3.HeadObjectInput{Bucket: aws.String("dirs"), Key: aws.String("d/")}); err != nil {
		t.Fatalf("locked directory object: %v", err)
	}
}

// Lock headers: malformed ones are refused, and a PUT with them needs
// Content-MD5 or a checksum, as S3 requires.
func TestObjectLockHeaders(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("hdr")
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	body := []byte("content")
	sum := md5.Sum(body)
	md5h := base64.StdEncoding.EncodeToString(sum[:])
	for i, c := range []struct {
		hdr  map[string]string
		want int
		code string
	}{
		{map[string]string{"x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": future}, 400, "InvalidRequest"},
		{map[string]string{"x-amz-object-lock-legal-hold": "ON"}, 400, "InvalidRequest"},
		{map[string]string{"x-amz-object-lock-mode": "GOVERNANCE", "Content-MD5": md5h}, 400, "InvalidArgument"},
		{map[string]string{"x-amz-object-lock-mode": "FOREVER", "x-amz-object-lock-retain-until-date": future, "Content-MD5": md5h}, 400, "InvalidArgument"},
		{map[string]string{"x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": "tomorrow", "Content-MD5": md5h}, 400, "InvalidArgument"},
		{map[string]string{"x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": "2001-01-01T00:00:00Z", "Content-MD5": md5h}, 400, "InvalidArgument"},
		{map[string]string{"x-amz-object-lock-legal-hold": "MAYBE", "Content-MD5": md5h}, 400, "InvalidArgument"},
		{map[string]string{"x-amz-object-lock-mode": "GOVERNANCE", "x-amz-object-lock-retain-until-date": future, "Content-MD5": md5h}, 200, ""},
		{map[string]string{"x-amz-object-lock-legal-hold": "ON", "x-amz-checksum-crc32": "/sUwqQ=="}, 200, ""},
		{map[string]string{}, 200, ""},
	} {
		resp, b := le.raw(http.MethodPut, fmt.Sprintf("/hdr/k%d", i), body, c.hdr)
		if resp.StatusCode != c.want || !strings.Contains(string(b), c.code) {
			t.Errorf("case %d %v: %d %s, want %d %s", i, c.hdr, resp.StatusCode, b, c.want, c.code)
		}
	}
}

// An anonymous request never bypasses GOVERNANCE retention through a
// public-read-write ACL, which lets it delete (and so delete versions).
func TestObjectLockAnonymousBypass(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("anon")
	if _, err := le.c.PutBucketAcl(le.ctx, &s3.PutBucketAclInput{Bucket: aws.String("anon"), ACL: types.BucketCannedACLPublicReadWrite}); err != nil {
		t.Fatal(err)
	}
	vid := le.putLocked(le.c, "anon", "k", types.ObjectLockModeGovernance, time.Now().Add(time.Hour), false)
	req, err := http.NewRequest(http.MethodDelete, le.gw.URL()+"/anon/k?versionId="+vid, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-amz-bypass-governance-retention", "true")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !le.versionExists("anon", "k", vid) {
		t.Fatalf("anonymous bypassing delete: %s, version kept: %v", resp.Status, le.versionExists("anon", "k", vid))
	}
	free := le.putLocked(le.c, "anon", "free", "", time.Time{}, false)
	req, _ = http.NewRequest(http.MethodDelete, le.gw.URL()+"/anon/free?versionId="+free, nil)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("anonymous delete of an unlocked version in a public-read-write bucket: %s", resp.Status)
	}
}

// Bucket policies see the lock a PUT asks for: here at most 30 days of
// retention for alice.
func TestObjectLockPolicyConditions(t *testing.T) {
	le := startLockEnv(t)
	le.mkLockBucket("cond")
	doc := `{"Statement":[{"Effect":"Deny","Principal":{"AWS":["alice"]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::cond/*",
		"Condition":{"NumericGreaterThan":{"s3:object-lock-remaining-retention-days":"30"}}}]}`
	if _, err := le.c.PutBucketPolicy(le.ctx, &s3.PutBucketPolicyInput{Bucket: aws.String("cond"), Policy: aws.String(doc)}); err != nil {
		t.Fatal(err)
	}
	put := func(days int) error {
		in := &s3.PutObjectInput{Bucket: aws.String("cond"), Key: aws.String("k"), Body: strings.NewReader("x")}
		if days > 0 {
			in.ObjectLockMode, in.ObjectLockRetainUntilDate = types.ObjectLockModeGovernance, aws.Time(time.Now().Add(time.Duration(days)*24*time.Hour))
		}
		_, err := le.alice.PutObject(le.ctx, in)
		return err
	}
	le.wantCode(put(60), "AccessDenied")
	for _, days := range []int{0, 10} {
		if err := put(days); err != nil {
			t.Fatalf("PUT with %d days of retention: %v", days, err)
		}
	}
}

func TestObjectLockPolicyActions(t *testing.T) {
	for op, want := range map[string]string{
		"GetObjectLockConfiguration": "s3:GetBucketObjectLockConfiguration",
		"PutObjectLockConfiguration": "s3:PutBucketObjectLockConfiguration",
		"GetObjectRetention":         "s3:GetObjectRetention",
		"PutObjectRetention":         "s3:PutObjectRetention",
		"GetObjectLegalHold":         "s3:GetObjectLegalHold",
		"PutObjectLegalHold":         "s3:PutObjectLegalHold",
		opBypassGovernance:           "s3:BypassGovernanceRetention",
	} {
		if got := policyAction(op, false); got != want {
			t.Errorf("policyAction(%s) = %s, want %s", op, got, want)
		}
	}
}
