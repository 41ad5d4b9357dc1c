package s3

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kelpfs/kelp/internal/objectapi"
)

// Action is a permission an identity may hold.
type Action string

// Actions. Admin implies every other one.
const (
	ActionRead    Action = "Read"    // get and head objects
	ActionWrite   Action = "Write"   // put, copy, delete objects; multipart uploads
	ActionList    Action = "List"    // list buckets and objects, read bucket settings
	ActionTagging Action = "Tagging" // object and bucket tags
	ActionAdmin   Action = "Admin"   // create and delete buckets, bucket settings
)

// Identity is a user of the gateway, and an account: one or more key pairs
// and the actions it may perform. An action is "Read" (on the buckets the
// identity owns or is granted by an ACL or a policy), or "Read:bucket"
// (the operator granting it on that bucket whoever owns it; "Read:logs-*"
// on the buckets with that prefix, "Read:*" on all); "Admin" is every
// action on every bucket. See ownership.go.
type Identity struct {
	Name        string       `json:"name"`
	Credentials []Credential `json:"credentials"`
	Actions     []string     `json:"actions"`
	// CanonicalID names the account in ACLs, owners and policies: 64
	// lower-case hex digits, by default hex(SHA-256("kelp:s3:identity:" +
	// Name)). Email (optional) lets ACL grants name it by e-mail address;
	// DisplayName defaults to Name.
	CanonicalID string `json:"canonicalId,omitempty"`
	Email       string `json:"email,omitempty"`
	DisplayName string `json:"displayName,omitempty"`
}

// Credential is an access key and its secret.
type Credential struct {
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
}

// IdentityFile is the format of the --config file:
//
//	{"identities": [
//	  {"name": "admin", "credentials": [{"accessKey": "AK1", "secretKey": "SK1"}], "actions": ["Admin"]},
//	  {"name": "backup", "credentials": [{"accessKey": "AK2", "secretKey": "SK2"}],
//	   "actions": ["Read:backups", "Write:backups", "List:backups"]}
//	]}
type IdentityFile struct {
	Identities []Identity `json:"identities"`
}

// identities is an immutable access-key index; the server swaps it whole
// on reload.
type identities struct {
	byKey   map[string]*identityEntry
	byID    map[string]*Identity // canonical id
	byEmail map[string]*Identity // lower-case e-mail address
}

type identityEntry struct {
	id     *Identity
	secret string
}

func newIdentities(ids []Identity) (*identities, error) {
	x := &identities{byKey: map[string]*identityEntry{}, byID: map[string]*Identity{}, byEmail: map[string]*Identity{}}
	for i := range ids {
		id := &ids[i]
		if len(id.Credentials) == 0 {
			return nil, fmt.Errorf("s3: identity %q has no credentials", id.Name)
		}
		if err := x.addAccount(id); err != nil {
			return nil, err
		}
		for _, a := range id.Actions {
			name, _, _ := strings.Cut(a, ":")
			switch Action(name) {
			case ActionRead, ActionWrite, ActionList, ActionTagging, ActionAdmin:
			default:
				return nil, fmt.Errorf("s3: identity %q: unknown action %q (want Read, Write, List, Tagging or Admin, optionally :bucket)", id.Name, a)
			}
		}
		for _, c := range id.Credentials {
			if c.AccessKey == "" || c.SecretKey == "" {
				return nil, fmt.Errorf("s3: identity %q has an empty access or secret key", id.Name)
			}
			if _, dup := x.byKey[c.AccessKey]; dup {
				return nil, fmt.Errorf("s3: access key %q is given twice", c.AccessKey)
			}
			x.byKey[c.AccessKey] = &identityEntry{id: id, secret: c.SecretKey}
		}
	}
	return x, nil
}

// LoadIdentityFile reads and checks an identity file.
func LoadIdentityFile(path string) ([]Identity, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	var f IdentityFile
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("s3: identity file %s: %w", path, err)
	}
	if _, err := newIdentities(f.Identities); err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return f.Identities, nil
}

// allowed reports whether id holds action (or Admin) for bucket ("" for
// requests without a bucket, such as ListBuckets): unscoped or scoped to
// it. Unscoped actions other than Admin apply only where ownership or a
// grant lets the identity in (authorize), so this is its upper bound.
func (id *Identity) allowed(action Action, bucket string) bool {
	return id.holds(action, bucket, true)
}

// operatorGranted reports whether the operator gave id action on bucket
// whoever owns it: unscoped Admin, or action or Admin scoped to the bucket.
func (id *Identity) operatorGranted(action Action, bucket string) bool {
	return id.holds(action, bucket, false)
}

func (id *Identity) holds(action Action, bucket string, unscoped bool) bool {
	for _, a := range id.Actions {
		name, scope, scoped := strings.Cut(a, ":")
		if Action(name) != action && Action(name) != ActionAdmin {
			continue
		}
		if !scoped {
			if unscoped || Action(name) == ActionAdmin {
				return true
			}
			continue
		}
		if scope == "*" {
			return true
		}
		if bucket == "" {
			continue
		}
		if p, ok := strings.CutSuffix(scope, "*"); ok && strings.HasPrefix(bucket, p) || scope == bucket {
			return true
		}
	}
	return false
}

// anyOn reports whether the operator gave id any action on bucket
// (ListBuckets shows those, besides the buckets it owns).
func (id *Identity) anyOn(bucket string) bool {
	for _, a := range []Action{ActionRead, ActionWrite, ActionList, ActionTagging} {
		if id.operatorGranted(a, bucket) {
			return true
		}
	}
	return false
}

// credentials implements sigv4.Credentials over the current identities.
type credentials struct{ cur *atomic.Pointer[identities] }

func (c credentials) SecretKey(accessKey string) (string, bool) {
	e, ok := c.cur.Load().byKey[accessKey]
	if !ok {
		return "", false
	}
	return e.secret, true
}

// lookup returns the identity of an access key.
func (s *Server) lookup(accessKey string) *Identity {
	if e, ok := s.ids.Load().byKey[accessKey]; ok {
		return e.id
	}
	return nil
}

// watchConfig reloads the identity file when its modification time or
// size changes, until ctx ends. A file that does not load keeps the
// previous identities (and is logged).
func (s *Server) watchConfig(ctx context.Context) {
	path := s.cfg.ConfigFile
	stamp := func() string {
		fi, err := os.Stat(path)
		if err != nil {
			return "missing"
		}
		return fmt.Sprint(fi.ModTime().UnixNano(), fi.Size())
	}
	last := stamp()
	t := time.NewTicker(s.cfg.ReloadInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := stamp()
		if now == last {
			continue
		}
		last = now
		if err := s.reload(); err != nil {
			s.log.Error("s3: identity file not reloaded; keeping the previous identities", "file", path, "err", err)
			continue
		}
		s.log.Info("s3: identities reloaded", "file", path)
	}
}

// reload reads the identity file and swaps it in, together with the
// static identities of the configuration.
func (s *Server) reload() error {
	ids := append([]Identity(nil), s.cfg.Identities...)
	if s.cfg.ConfigFile != "" {
		more, err := LoadIdentityFile(s.cfg.ConfigFile)
		if err != nil {
			return err
		}
		ids = append(ids, more...)
	}
	var stamp string
	if s.cfg.SharedIdentities != "" {
		shared, st, err := s.loadShared(context.Background())
		if err == nil {
			var x *identities
			if x, err = newIdentities(append(append([]Identity(nil), ids...), shared...)); err == nil {
				s.ids.Store(x)
				s.sharedAt.Store(&st)
				return nil
			}
		}
		if s.ids.Load() != nil {
			return err
		}
		// At start a bad shared file does not keep the gateway down.
		s.log.Error("s3: shared identities not loaded; starting without them", "file", s.cfg.SharedIdentities, "err", err)
		stamp = st
	}
	x, err := newIdentities(ids)
	if err != nil {
		return err
	}
	s.ids.Store(x)
	s.sharedAt.Store(&stamp)
	return nil
}

// conditionValues are the request's policy condition keys (see
// objectapi.ConditionValues).
func (rq *request) conditionValues() objectapi.ConditionValues {
	r := rq.r
	now := time.Now().UTC()
	v := objectapi.ConditionValues{
		"aws:securetransport": {strconv.FormatBool(r.TLS != nil)},
		"aws:currenttime":     {now.Format(time.RFC3339)},
		"aws:epochtime":       {strconv.FormatInt(now.Unix(), 10)},
		"aws:principaltype":   {"Anonymous"},
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		v["aws:sourceip"] = []string{host}
	}
	set := func(key, val string) {
		if val != "" {
			v[key] = []string{val}
		}
	}
	set("aws:referer", r.Header.Get("Referer"))
	set("aws:useragent", r.Header.Get("User-Agent"))
	if rq.id != nil {
		v["aws:principaltype"] = []string{"User"}
		set("aws:username", rq.id.Name)
		set("aws:userid", rq.auth.AccessKey)
		sig, auth := "AWS4-HMAC-SHA256", "REST-HEADER"
		if rq.auth.SignatureV2 {
			sig = "AWS"
		}
		if rq.auth.Presigned {
			auth = "REST-QUERY-STRING"
		}
		set("s3:signatureversion", sig)
		set("s3:authtype", auth)
	}
	for _, q := range []string{"prefix", "delimiter", "max-keys", "versionId"} {
		if vals, ok := rq.q[q]; ok && len(vals) > 0 {
			v["s3:"+strings.ToLower(q)] = vals[:1]
		}
	}
	for _, h := range []string{"x-amz-acl", "x-amz-copy-source", "x-amz-metadata-directive", "x-amz-server-side-encryption",
		"x-amz-storage-class", "x-amz-content-sha256"} {
		set("s3:"+h, r.Header.Get(h))
	}
	lockConditionValues(r.Header, now, v)
	if tags, err := url.ParseQuery(r.Header.Get("x-amz-tagging")); err == nil && len(tags) > 0 {
		for k, vals := range tags {
			v["s3:requestobjecttagkeys"] = append(v["s3:requestobjecttagkeys"], k)
			v["s3:requestobjecttag/"+strings.ToLower(k)] = vals
		}
	}
	return v
}

// principals are the names by which a bucket policy may grant the
// requester rights: its access key, identity name and canonical id (none
// if anonymous).
func (rq *request) principals() []string {
	if rq.id == nil {
		return nil
	}
	return []string{rq.auth.AccessKey, rq.id.Name, rq.id.CanonicalID}
}
