package s3

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// TestAuthorizationModel checks authorization against a small reference
// model written from the S3 documentation (bucket policies, ACLs, object
// ownership, public access blocks) and the identity rules of docs/s3.md,
// over many seeded random worlds: identities with random action lists, a
// bucket with a random owner, ACL, ownership setting, public access block
// and policy, an object with a random owner and ACL, and a random request.
// KELP_AUTHZ_SEED=N runs another sequence.
func TestAuthorizationModel(t *testing.T) {
	seed := uint64(1)
	if v := os.Getenv("KELP_AUTHZ_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	rng := rand.New(rand.NewPCG(seed, 99))
	allowedN := 0
	const cases = 8000
	for i := 0; i < cases; i++ {
		w := randomWorld(rng)
		got := w.decideImpl(t)
		want := w.reference()
		if got != want {
			t.Fatalf("case %d (seed %d): authorize says %v, the model %v\n%s", i, seed, got, want, w)
		}
		if got {
			allowedN++
		}
	}
	// A model that allows everything or nothing tests little.
	if allowedN < cases/10 || allowedN > cases*9/10 {
		t.Fatalf("%d of %d requests allowed: the random worlds are lopsided", allowedN, cases)
	}
	t.Logf("%d cases, %d allowed", cases, allowedN)
}

// The reference model's world.

type refUser struct {
	name    string
	actions []string
	id      string // canonical id, as docs/s3.md defines it
}

type refGrant struct {
	who  string // canonical id, "AllUsers", "AuthenticatedUsers" or "LogDelivery"
	perm string
}

type refStatement struct {
	deny      bool
	principal string // "*" or a user's name, access key or canonical id
	action    string
	resource  string
	cond      string // "", "match" (aws:SourceIp 127.0.0.0/8) or "nomatch" (10.0.0.0/8)
}

type refOp struct {
	name      string
	action    string // identity action
	onObject  bool   // names the object k
	iam       string
	perm      string // ACL permission S3 maps it to, "" none
	permOnObj bool   // the permission is checked on the object's ACL
}

// refOps are operations with their identity action, IAM action and ACL
// permission, from the S3 docs' mapping of ACL permissions to operations.
var refOps = []refOp{
	{"ListObjectsV2", "List", false, "s3:ListBucket", "READ", false},
	{"HeadBucket", "List", false, "s3:ListBucket", "READ", false},
	{"GetBucketAcl", "List", false, "s3:GetBucketAcl", "READ_ACP", false},
	{"PutBucketAcl", "Admin", false, "s3:PutBucketAcl", "WRITE_ACP", false},
	{"GetBucketPolicy", "Admin", false, "s3:GetBucketPolicy", "", false},
	{"PutBucketPolicy", "Admin", false, "s3:PutBucketPolicy", "", false},
	{"DeleteBucketPolicy", "Admin", false, "s3:DeleteBucketPolicy", "", false},
	{"PutBucketVersioning", "Admin", false, "s3:PutBucketVersioning", "", false},
	{"GetBucketTagging", "Tagging", false, "s3:GetBucketTagging", "", false},
	{"DeleteBucket", "Admin", false, "s3:DeleteBucket", "", false},
	{"CreateBucket", "Write", false, "s3:CreateBucket", "", false},
	{"PutObject", "Write", true, "s3:PutObject", "WRITE", false},
	{"DeleteObject", "Write", true, "s3:DeleteObject", "WRITE", false},
	{"GetObject", "Read", true, "s3:GetObject", "READ", true},
	{"HeadObject", "Read", true, "s3:GetObject", "READ", true},
	{"GetObjectAcl", "Read", true, "s3:GetObjectAcl", "READ_ACP", true},
	{"PutObjectAcl", "Write", true, "s3:PutObjectAcl", "WRITE_ACP", true},
	{"GetObjectTagging", "Tagging", true, "s3:GetObjectTagging", "", true},
	{"BypassGovernanceRetention", "Admin", true, "s3:BypassGovernanceRetention", "", true},
}

type world struct {
	users []*refUser

	bucketExists bool
	bucketOwner  *refUser // nil: none (a bucket from before owners)
	bucketCanned string   // used when bucketGrants is nil
	bucketGrants []refGrant
	ownership    string // "" none stored
	pab          *objectapi.PublicAccessBlock
	statements   []refStatement

	objectExists bool
	objectOwner  *refUser // nil: none stored
	objectCanned string
	objectGrants []refGrant

	requester *refUser // nil: anonymous
	op        refOp
}

func (w *world) String() string {
	var b strings.Builder
	for _, u := range w.users {
		fmt.Fprintf(&b, "user %s %v\n", u.name, u.actions)
	}
	name := func(u *refUser) string {
		if u == nil {
			return "<none>"
		}
		return u.name
	}
	fmt.Fprintf(&b, "bucket exists=%v owner=%s canned=%q grants=%v ownership=%q pab=%+v\n", w.bucketExists, name(w.bucketOwner),
		w.bucketCanned, w.bucketGrants, w.ownership, w.pab)
	fmt.Fprintf(&b, "policy %+v\n", w.statements)
	fmt.Fprintf(&b, "object exists=%v owner=%s canned=%q grants=%v\n", w.objectExists, name(w.objectOwner), w.objectCanned, w.objectGrants)
	fmt.Fprintf(&b, "request by %s: %s", name(w.requester), w.op.name)
	return b.String()
}

func pick[T any](rng *rand.Rand, xs ...T) T { return xs[rng.IntN(len(xs))] }

func randomWorld(rng *rand.Rand) *world {
	w := &world{}
	for i := range 3 {
		u := &refUser{name: fmt.Sprintf("u%d", i)}
		for _, a := range []string{"Read", "Write", "List", "Tagging"} {
			switch rng.IntN(6) {
			case 0, 1, 2:
				u.actions = append(u.actions, a)
			case 3:
				u.actions = append(u.actions, a+":"+pick(rng, "b", "b*", "other", "*"))
			}
		}
		if rng.IntN(12) == 0 {
			u.actions = append(u.actions, pick(rng, "Admin", "Admin:b", "Admin:other"))
		}
		w.users = append(w.users, u)
	}
	user := func() *refUser { return w.users[rng.IntN(len(w.users))] }
	maybeUser := func() *refUser {
		if rng.IntN(5) == 0 {
			return nil
		}
		return user()
	}
	grants := func() []refGrant {
		out := []refGrant{}
		for range rng.IntN(4) {
			who := pick(rng, "AllUsers", "AuthenticatedUsers", "LogDelivery", "user", "user")
			if who == "user" {
				who = user().id
			}
			out = append(out, refGrant{who, pick(rng, "READ", "WRITE", "READ_ACP", "WRITE_ACP", "FULL_CONTROL")})
		}
		return out
	}
	for _, u := range w.users {
		u.id = defaultCanonicalID(u.name)
	}
	w.bucketExists = rng.IntN(10) > 0
	w.bucketOwner = maybeUser()
	if rng.IntN(3) == 0 {
		w.bucketGrants = grants()
	} else {
		w.bucketCanned = pick(rng, "private", "public-read", "public-read-write", "authenticated-read", "log-delivery-write")
	}
	w.ownership = pick(rng, "", "ObjectWriter", "BucketOwnerPreferred", "BucketOwnerEnforced")
	if rng.IntN(3) == 0 {
		w.pab = &objectapi.PublicAccessBlock{BlockPublicAcls: rng.IntN(2) == 0, IgnorePublicAcls: rng.IntN(2) == 0,
			BlockPublicPolicy: rng.IntN(2) == 0, RestrictPublicBuckets: rng.IntN(2) == 0}
	}
	for range rng.IntN(4) {
		st := refStatement{deny: rng.IntN(4) == 0,
			action:   pick(rng, "s3:*", "s3:GetObject", "s3:Get*", "s3:ListBucket", "s3:PutObject", "s3:DeleteObject", "s3:PutBucketAcl", "s3:GetObjectAcl", "s3:PutBucketPolicy", "s3:BypassGovernanceRetention"),
			resource: pick(rng, "arn:aws:s3:::b", "arn:aws:s3:::b/*", "arn:aws:s3:::b/k", "arn:aws:s3:::b/other", "arn:aws:s3:::b/k*"),
			cond:     pick(rng, "", "", "match", "nomatch"),
		}
		switch u := user(); rng.IntN(4) {
		case 0:
			st.principal = "*"
		case 1:
			st.principal = u.name
		case 2:
			st.principal = "AK" + u.name
		default:
			st.principal = u.id
		}
		w.statements = append(w.statements, st)
	}
	w.objectExists = rng.IntN(6) > 0
	w.objectOwner = maybeUser()
	if rng.IntN(3) == 0 {
		w.objectGrants = grants()
	} else {
		w.objectCanned = pick(rng, "private", "public-read", "public-read-write", "authenticated-read", "bucket-owner-read", "bucket-owner-full-control")
	}
	w.requester = maybeUser()
	w.op = refOps[rng.IntN(len(refOps))]
	return w
}

// The implementation's view of the world, built as the gateway builds it
// from stored buckets and objects.

func (w *world) decideImpl(t *testing.T) bool {
	q, a, object := w.implQuery(t)
	return decide(q, a, object)
}

// implQuery builds the question, the bucket and the object loader.
func (w *world) implQuery(t *testing.T) (*accessQuery, *bucketAccess, func() *objectFacts) {
	ids := make([]Identity, len(w.users))
	for i, u := range w.users {
		ids[i] = Identity{Name: u.name, Credentials: []Credential{{"AK" + u.name, "secret"}}, Actions: u.actions}
	}
	x, err := newIdentities(ids)
	if err != nil {
		t.Fatal(err)
	}
	ownerID := func(u *refUser) string {
		if u == nil {
			return ""
		}
		return u.id
	}
	a := &bucketAccess{}
	if w.bucketExists {
		b := objectapi.Bucket{Name: "b", Owner: ownerID(w.bucketOwner), ACL: w.bucketCanned, Grants: implGrants(w.bucketGrants),
			Ownership: w.ownership, PublicAccessBlock: w.pab}
		a = newBucketAccess(b)
		if len(w.statements) > 0 {
			if a.policy, err = objectapi.ParsePolicy("b", w.policyJSON()); err != nil {
				t.Fatalf("policy: %v\n%s", err, w.policyJSON())
			}
		}
	}
	q := &accessQuery{op: w.op.name, action: Action(w.op.action), bucket: "b",
		cond: objectapi.ConditionValues{"aws:sourceip": {"127.0.0.1"}}}
	if w.op.onObject {
		q.key = "k"
	}
	if w.requester != nil {
		q.id = x.byKey["AK"+w.requester.name].id
		q.principals = []string{"AK" + w.requester.name, q.id.Name, q.id.CanonicalID}
	}
	object := func() *objectFacts {
		if !w.objectExists {
			return nil
		}
		return a.objectFactsOf(objectapi.ObjectInfo{Owner: ownerID(w.objectOwner), ACL: w.objectCanned, Grants: implGrants(w.objectGrants)})
	}
	return q, a, object
}

func implGrants(gs []refGrant) []objectapi.Grant {
	if gs == nil {
		return nil
	}
	out := []objectapi.Grant{}
	for _, g := range gs {
		switch g.who {
		case "AllUsers", "AuthenticatedUsers":
			out = append(out, objectapi.Grant{Type: "Group", URI: "http://acs.amazonaws.com/groups/global/" + g.who, Permission: g.perm})
		case "LogDelivery":
			out = append(out, objectapi.Grant{Type: "Group", URI: "http://acs.amazonaws.com/groups/s3/LogDelivery", Permission: g.perm})
		default:
			out = append(out, objectapi.Grant{Type: "CanonicalUser", ID: g.who, Permission: g.perm})
		}
	}
	return out
}

func (w *world) policyJSON() []byte {
	var sts []map[string]any
	for _, s := range w.statements {
		st := map[string]any{"Effect": "Allow", "Action": s.action, "Resource": s.resource}
		if s.deny {
			st["Effect"] = "Deny"
		}
		if s.principal == "*" {
			st["Principal"] = "*"
		} else {
			st["Principal"] = map[string]any{"AWS": []string{s.principal}}
		}
		switch s.cond {
		case "match":
			st["Condition"] = map[string]any{"IpAddress": map[string]any{"aws:SourceIp": "127.0.0.0/8"}}
		case "nomatch":
			st["Condition"] = map[string]any{"IpAddress": map[string]any{"aws:SourceIp": "10.0.0.0/8"}}
		}
		sts = append(sts, st)
	}
	b, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": sts})
	return b
}

// The reference model.

// holds reports whether u's action list has action (or Admin) for bucket
// "b"; operator: only entries scoped to b (or "*"), and unscoped Admin.
func (u *refUser) holds(action string, operator bool) bool {
	if u == nil {
		return false
	}
	for _, a := range u.actions {
		name, scope, scoped := strings.Cut(a, ":")
		if name != action && name != "Admin" {
			continue
		}
		switch {
		case !scoped && (!operator || name == "Admin"):
			return true
		case scoped && (scope == "b" || scope == "b*" || scope == "*"):
			return true
		}
	}
	return false
}

// wildcard matches s against a pattern whose only wildcard is '*'
// (the generated patterns have at most one, at the end).
func wildcard(pattern, s string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(s, p)
	}
	return pattern == s
}

// policy evaluates the bucket policy for the request: whether an
// applicable statement allows and whether one denies.
func (w *world) policy() (allow, deny bool) {
	resource := "arn:aws:s3:::b"
	if w.op.onObject {
		resource += "/k"
	}
	for _, s := range w.statements {
		r := w.requester
		applies := s.principal == "*" || r != nil && (s.principal == r.name || s.principal == "AK"+r.name || s.principal == r.id)
		if !applies || s.cond == "nomatch" || !wildcard(s.action, w.op.iam) || !wildcard(s.resource, resource) {
			continue
		}
		if s.deny {
			deny = true
		} else {
			allow = true
		}
	}
	return allow, deny
}

// policyPublic: an Allow to "*" without a condition on the source
// address is public (S3's definition, for the keys generated here).
func (w *world) policyPublic() bool {
	for _, s := range w.statements {
		if !s.deny && s.principal == "*" && s.cond == "" {
			return true
		}
	}
	return false
}

// permsOf is the set of ACL permissions a grant list gives the requester,
// leaving out grants to the resource's owner (whose rights come from
// ownership) and public grants when they are ignored.
func (w *world) permsOf(grants []refGrant, owner string) map[string]bool {
	out := map[string]bool{}
	r := w.requester
	ignorePublic := w.pab != nil && w.pab.IgnorePublicAcls
	for _, g := range grants {
		var mine bool
		switch g.who {
		case "AllUsers":
			mine = !ignorePublic
		case "AuthenticatedUsers":
			mine = !ignorePublic && r != nil
		case "LogDelivery":
		default:
			mine = r != nil && g.who == r.id && g.who != owner
		}
		if !mine {
			continue
		}
		if g.perm == "FULL_CONTROL" {
			for _, p := range []string{"READ", "WRITE", "READ_ACP", "WRITE_ACP"} {
				out[p] = true
			}
		}
		out[g.perm] = true
	}
	return out
}

// cannedGrants expands a canned ACL as the S3 docs' table of canned ACLs
// does.
func cannedGrants(canned, owner, bucketOwner string) []refGrant {
	var gs []refGrant
	if owner != "" {
		gs = append(gs, refGrant{owner, "FULL_CONTROL"})
	}
	switch canned {
	case "public-read":
		gs = append(gs, refGrant{"AllUsers", "READ"})
	case "public-read-write":
		gs = append(gs, refGrant{"AllUsers", "READ"}, refGrant{"AllUsers", "WRITE"})
	case "authenticated-read":
		gs = append(gs, refGrant{"AuthenticatedUsers", "READ"})
	case "bucket-owner-read":
		if bucketOwner != "" {
			gs = append(gs, refGrant{bucketOwner, "READ"})
		}
	case "bucket-owner-full-control":
		if bucketOwner != "" {
			gs = append(gs, refGrant{bucketOwner, "FULL_CONTROL"})
		}
	case "log-delivery-write":
		gs = append(gs, refGrant{"LogDelivery", "WRITE"}, refGrant{"LogDelivery", "READ_ACP"})
	}
	return gs
}

// reference decides the request by docs/s3.md's rules.
func (w *world) reference() bool {
	r, op := w.requester, w.op
	if op.name == "CreateBucket" {
		return r.holds("Write", false)
	}
	ownerAction := op.action
	if ownerAction == "Admin" {
		ownerAction = "Write"
	}
	bucketOwner := ""
	if w.bucketOwner != nil {
		bucketOwner = w.bucketOwner.id
	}
	admin := r.holds("Admin", true)
	isOwner := r != nil && w.bucketExists && bucketOwner == r.id
	allow, deny := false, false
	if w.bucketExists {
		allow, deny = w.policy()
		if w.pab != nil && w.pab.RestrictPublicBuckets && w.policyPublic() {
			allow = false
		}
	}
	policyOp := op.name == "GetBucketPolicy" || op.name == "PutBucketPolicy" || op.name == "DeleteBucketPolicy"
	if deny && !((admin || isOwner) && (op.name == "PutBucketPolicy" || op.name == "DeleteBucketPolicy")) {
		return false
	}
	if admin || r.holds(op.action, true) {
		return true
	}
	if !w.bucketExists {
		return r.holds(ownerAction, false) // it would own the bucket it could create
	}
	if isOwner && r.holds(ownerAction, false) {
		return true
	}
	if allow && !policyOp {
		return true
	}
	if w.ownership == "BucketOwnerEnforced" {
		return false
	}
	if !op.permOnObj && !op.onObject || !op.permOnObj && op.perm != "" {
		grants := w.bucketGrants
		if grants == nil {
			grants = cannedGrants(w.bucketCanned, bucketOwner, bucketOwner)
		}
		return op.perm != "" && w.permsOf(grants, bucketOwner)[op.perm]
	}
	if !w.objectExists {
		return false
	}
	objectOwner := bucketOwner
	if w.objectOwner != nil && w.ownership != "BucketOwnerEnforced" {
		objectOwner = w.objectOwner.id
	}
	if r != nil && objectOwner == r.id && r.holds(ownerAction, false) {
		return true
	}
	grants := w.objectGrants
	if grants == nil {
		grants = cannedGrants(w.objectCanned, objectOwner, bucketOwner)
	}
	return op.perm != "" && w.permsOf(grants, objectOwner)[op.perm]
}

// BenchmarkDecide is the cost of one authorization decision for random
// worlds (the stored bucket and object are read apart, once per request).
func BenchmarkDecide(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 99))
	t := &testing.T{}
	worlds := make([]*world, 256)
	for i := range worlds {
		worlds[i] = randomWorld(rng)
	}
	type prepared struct {
		q *accessQuery
		a *bucketAccess
		o func() *objectFacts
	}
	ps := make([]prepared, len(worlds))
	for i, w := range worlds {
		ps[i].q, ps[i].a, ps[i].o = w.implQuery(t)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := ps[i%len(ps)]
		decide(p.q, p.a, p.o)
	}
}
