package adminui

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/kelpfs/kelp/internal/s3"
)

// The S3 access keys page edits the identity file the gateways share
// through the filer (s3.SharedIdentitiesPath); each gateway re-reads it
// when it changes. Secret keys are shown once, on the page answering the
// creation, and never listed or logged.

// keysMu serialises this process's read-modify-write of the file.
var keysMu sync.Mutex

var identityName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+=-]{0,63}$`)

var keyActions = []string{"Read", "Write", "List", "Tagging", "Admin"}

func (u *UI) loadKeys(ctx context.Context) (s3.IdentityFile, error) {
	var f s3.IdentityFile
	resp, err := u.filerDo(ctx, http.MethodGet, s3.SharedIdentitiesPath, "", nil, nil)
	if errors.Is(err, errFilerNotFound) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return f, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return f, nil
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("the filer's %s is not an identity file: %w", s3.SharedIdentitiesPath, err)
	}
	return f, nil
}

func (u *UI) storeKeys(ctx context.Context, f s3.IdentityFile) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	resp, err := u.filerDo(ctx, http.MethodPut, s3.SharedIdentitiesPath, "", bytes.NewReader(append(b, '\n')),
		http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

type keyRow struct {
	Identity, AccessKey string
	Actions             []string
}

func (u *UI) keysPage(w http.ResponseWriter, r *http.Request, id identity) {
	f, err := u.loadKeys(r.Context())
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	var rows []keyRow
	for _, i := range f.Identities {
		for _, c := range i.Credentials {
			rows = append(rows, keyRow{Identity: i.Name, AccessKey: c.AccessKey, Actions: i.Actions})
		}
	}
	u.render(w, r, http.StatusOK, "s3keys", id, "S3 access keys",
		map[string]any{"Keys": rows, "Actions": keyActions, "Path": s3.SharedIdentitiesPath})
}

// newKeyPair makes an access key (20 characters, as AWS's) and a secret
// (40 characters, 240 random bits).
func newKeyPair() (string, string) {
	a, s := make([]byte, 8), make([]byte, 30)
	rand.Read(a)
	rand.Read(s)
	return "KELP" + strings.ToUpper(hex.EncodeToString(a)), base64.RawURLEncoding.EncodeToString(s)
}

func (u *UI) createKey(w http.ResponseWriter, r *http.Request, id identity) {
	name := strings.TrimSpace(r.FormValue("name"))
	if !identityName.MatchString(name) {
		u.fail(w, r, id, http.StatusBadRequest, fmt.Errorf("identity name %q: 1 to 64 of A-Z a-z 0-9 . _ @ + = -", name))
		return
	}
	bucket := strings.TrimSpace(r.FormValue("bucket"))
	if bucket != "" && bucket != "*" && !bucketName.MatchString(strings.TrimSuffix(bucket, "*")+"aaa") {
		u.fail(w, r, id, http.StatusBadRequest, fmt.Errorf("bucket scope %q: a bucket name, a prefix ending in *, or *", bucket))
		return
	}
	var actions []string
	for _, a := range r.Form["action"] {
		if !slices.Contains(keyActions, a) {
			u.fail(w, r, id, http.StatusBadRequest, fmt.Errorf("unknown action %q", a))
			return
		}
		if bucket != "" {
			a += ":" + bucket
		}
		actions = append(actions, a)
	}
	keysMu.Lock()
	defer keysMu.Unlock()
	f, err := u.loadKeys(r.Context())
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	ak, sk := newKeyPair()
	i := slices.IndexFunc(f.Identities, func(x s3.Identity) bool { return x.Name == name })
	added := i >= 0
	if added {
		f.Identities[i].Credentials = append(f.Identities[i].Credentials, s3.Credential{AccessKey: ak, SecretKey: sk})
		actions = f.Identities[i].Actions
	} else {
		if len(actions) == 0 {
			u.fail(w, r, id, http.StatusBadRequest, errors.New("a new identity needs at least one action"))
			return
		}
		f.Identities = append(f.Identities, s3.Identity{Name: name, Actions: actions,
			Credentials: []s3.Credential{{AccessKey: ak, SecretKey: sk}}})
	}
	if err := u.storeKeys(r.Context(), f); err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	u.log.Info("admin s3 key created", "user", id.user, "identity", name, "accessKey", ak)
	// The one time the secret is shown: this answer (no-store), not a page
	// that can be fetched again.
	u.render(w, r, http.StatusOK, "s3key-created", id, "S3 access key created",
		map[string]any{"Identity": name, "AccessKey": ak, "SecretKey": sk, "Actions": actions, "Existing": added})
}

func (u *UI) revokeKey(w http.ResponseWriter, r *http.Request, id identity) {
	ak := r.FormValue("accessKey")
	if ak == "" {
		u.fail(w, r, id, http.StatusBadRequest, errors.New("which access key?"))
		return
	}
	if r.FormValue("confirm") != "yes" {
		u.fail(w, r, id, http.StatusBadRequest, errors.New("tick the box to confirm the revocation"))
		return
	}
	keysMu.Lock()
	defer keysMu.Unlock()
	f, err := u.loadKeys(r.Context())
	if err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	found := ""
	for i := 0; i < len(f.Identities); i++ {
		x := &f.Identities[i]
		n := len(x.Credentials)
		x.Credentials = slices.DeleteFunc(x.Credentials, func(c s3.Credential) bool { return c.AccessKey == ak })
		if len(x.Credentials) == n {
			continue
		}
		found = x.Name
		if len(x.Credentials) == 0 { // an identity without keys does not load
			f.Identities = slices.Delete(f.Identities, i, i+1)
		}
		break
	}
	if found == "" {
		u.fail(w, r, id, http.StatusNotFound, fmt.Errorf("no access key %q among the shared keys", ak))
		return
	}
	if err := u.storeKeys(r.Context(), f); err != nil {
		u.fail(w, r, id, http.StatusBadGateway, err)
		return
	}
	u.log.Info("admin s3 key revoked", "user", id.user, "identity", found, "accessKey", ak)
	http.Redirect(w, r, "/s3keys", http.StatusSeeOther)
}
