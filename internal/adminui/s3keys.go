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
	mrand "math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/s3"
)

// The S3 access keys page edits the identity file the gateways share
// through the filer (s3.SharedIdentitiesPath); each gateway re-reads it
// when it changes. Secret keys are shown once, on the page answering the
// creation, and never listed or logged. Every edit is a compare-and-swap
// (editKeys): UIs of several masters may edit at once.

var identityName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+=-]{0,63}$`)

var keyActions = []string{"Read", "Write", "List", "Tagging", "Admin"}

// loadKeys reads the shared identity file and its ETag ("" when there is
// no file yet). A read cut short is read again: the filer may collect the
// chunks of a version that another editor replaced while it streams them.
func (u *UI) loadKeys(ctx context.Context) (s3.IdentityFile, string, error) {
	for attempt := 1; ; attempt++ {
		f, etag, err := u.loadKeysOnce(ctx)
		if !errors.Is(err, io.ErrUnexpectedEOF) || attempt == 5 || ctx.Err() != nil {
			return f, etag, err
		}
	}
}

func (u *UI) loadKeysOnce(ctx context.Context) (s3.IdentityFile, string, error) {
	var f s3.IdentityFile
	resp, err := u.filerDo(ctx, http.MethodGet, s3.SharedIdentitiesPath, "", nil, nil)
	if errors.Is(err, errFilerNotFound) {
		return f, "", nil
	}
	if err != nil {
		return f, "", err
	}
	defer resp.Body.Close()
	etag := strings.Trim(resp.Header.Get("Etag"), `"`)
	if etag == "" {
		return f, "", fmt.Errorf("the filer answered %s without an ETag", s3.SharedIdentitiesPath)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return f, "", fmt.Errorf("read %s from the filer: %w", s3.SharedIdentitiesPath, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return f, etag, nil
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, "", fmt.Errorf("the filer's %s is not an identity file: %w", s3.SharedIdentitiesPath, err)
	}
	return f, etag, nil
}

// storeKeys writes f in place of the version with ETag etag ("": in place
// of no file); errFilerChanged when another editor wrote in between.
func (u *UI) storeKeys(ctx context.Context, f s3.IdentityFile, etag string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if etag == "" {
		h.Set("If-None-Match", "*")
	} else {
		h.Set("If-Match", `"`+etag+`"`)
	}
	resp, err := u.filerDo(ctx, http.MethodPut, s3.SharedIdentitiesPath, "", bytes.NewReader(append(b, '\n')), h)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// maxKeyEdits bounds the attempts of one edit that other editors keep
// overtaking (each attempt lost is another's edit that went in).
const maxKeyEdits = 50

// editKeys applies edit to the shared identity file as a compare-and-swap:
// two UIs (of one master or of several) editing at once both get their
// change in, the later one applying it again to the file as the earlier
// left it. edit may run more than once; an error from it ends the edit
// with nothing written.
func (u *UI) editKeys(ctx context.Context, edit func(f *s3.IdentityFile) error) error {
	for attempt := 1; ; attempt++ {
		f, etag, err := u.loadKeys(ctx)
		if err != nil {
			return err
		}
		if err := edit(&f); err != nil {
			return err
		}
		err = u.storeKeys(ctx, f, etag)
		if !errors.Is(err, errFilerChanged) {
			return err
		}
		if attempt == maxKeyEdits {
			return fmt.Errorf("%s kept changing under this edit (%d attempts); try again", s3.SharedIdentitiesPath, attempt)
		}
		// Spread the retries of editors that collided.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(mrand.IntN(attempt*2000)+100) * time.Microsecond):
		}
	}
}

// keyError is an edit's refusal, with the status to answer.
type keyError struct {
	status int
	err    error
}

func (e *keyError) Error() string { return e.err.Error() }

func (u *UI) failKeys(w http.ResponseWriter, r *http.Request, id identity, err error) {
	var ke *keyError
	if errors.As(err, &ke) {
		u.fail(w, r, id, ke.status, ke.err)
		return
	}
	u.fail(w, r, id, http.StatusBadGateway, err)
}

type keyRow struct {
	Identity, AccessKey string
	Actions             []string
}

func (u *UI) keysPage(w http.ResponseWriter, r *http.Request, id identity) {
	f, _, err := u.loadKeys(r.Context())
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
	ak, sk := newKeyPair()
	added, shown := false, actions
	err := u.editKeys(r.Context(), func(f *s3.IdentityFile) error {
		i := slices.IndexFunc(f.Identities, func(x s3.Identity) bool { return x.Name == name })
		added, shown = i >= 0, actions
		if added {
			f.Identities[i].Credentials = append(f.Identities[i].Credentials, s3.Credential{AccessKey: ak, SecretKey: sk})
			shown = f.Identities[i].Actions
			return nil
		}
		if len(actions) == 0 {
			return &keyError{http.StatusBadRequest, errors.New("a new identity needs at least one action")}
		}
		f.Identities = append(f.Identities, s3.Identity{Name: name, Actions: actions,
			Credentials: []s3.Credential{{AccessKey: ak, SecretKey: sk}}})
		return nil
	})
	if err != nil {
		u.failKeys(w, r, id, err)
		return
	}
	u.log.Info("admin s3 key created", "user", id.user, "identity", name, "accessKey", ak)
	// The one time the secret is shown: this answer (no-store), not a page
	// that can be fetched again.
	u.render(w, r, http.StatusOK, "s3key-created", id, "S3 access key created",
		map[string]any{"Identity": name, "AccessKey": ak, "SecretKey": sk, "Actions": shown, "Existing": added})
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
	found := ""
	err := u.editKeys(r.Context(), func(f *s3.IdentityFile) error {
		found = ""
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
			return nil
		}
		return &keyError{http.StatusNotFound, fmt.Errorf("no access key %q among the shared keys", ak)}
	})
	if err != nil {
		u.failKeys(w, r, id, err)
		return
	}
	u.log.Info("admin s3 key revoked", "user", id.user, "identity", found, "accessKey", ak)
	http.Redirect(w, r, "/s3keys", http.StatusSeeOther)
}
