package adminui

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kelpfs/kelp/internal/erasure"
	"github.com/kelpfs/kelp/internal/replication"
	"github.com/kelpfs/kelp/internal/topology"
)

// collectionRow is a row of the collections page: its volumes summed up
// (copies counted once, as on the volumes page).
type collectionRow struct {
	Name                 string
	Volumes, EcVolumes   int
	Size, Files, Deleted uint64
}

func (u *UI) collections() []collectionRow {
	by := map[string]*collectionRow{}
	get := func(name string) *collectionRow {
		c := by[name]
		if c == nil {
			c = &collectionRow{Name: name}
			by[name] = c
		}
		return c
	}
	for _, v := range volumeRows(u.cfg.Source.TopologyStatus()) {
		c := get(v.Collection)
		c.Volumes++
		c.Size += v.Size
		c.Files += v.Files
		c.Deleted += v.Deleted
	}
	for _, e := range u.cfg.Source.EcVolumes() {
		get(e.Collection).EcVolumes++
	}
	out := make([]collectionRow, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b collectionRow) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// collectionsPage lists the collections; deleting one is the maintenance
// job "collection-delete" (collection.delete under the admin lock: a dry
// run, then its apply button).
func (u *UI) collectionsPage(w http.ResponseWriter, r *http.Request, id identity) {
	u.render(w, r, http.StatusOK, "collections", id, "Collections", map[string]any{"Collections": u.collections()})
}

// createTimeout bounds the settings commit and the growth of a new
// collection.
const createTimeout = time.Minute

// collectionSettings is the create form's optional settings, checked.
type collectionSettings struct {
	replication, ec, writePolicy string
	minCopies                    int
}

func parseCollectionForm(r *http.Request) (name string, cs collectionSettings, err error) {
	name = strings.TrimSpace(r.PostFormValue("name"))
	if name == "" || !collectionRe.MatchString(name) {
		return "", cs, fmt.Errorf("a collection name is 1 to 128 letters, digits, '_', '.' and '-'")
	}
	cs.replication = strings.TrimSpace(r.PostFormValue("replication"))
	if _, err := replication.Parse(cs.replication); cs.replication != "" && err != nil {
		return "", cs, fmt.Errorf("replication: %v", err)
	}
	cs.ec = strings.TrimSpace(r.PostFormValue("ec"))
	if _, err := erasure.ParseScheme(cs.ec); cs.ec != "" && err != nil {
		return "", cs, fmt.Errorf("EC scheme: %v", err)
	}
	switch cs.writePolicy = r.PostFormValue("writePolicy"); cs.writePolicy {
	case "", "strict":
	case "degraded":
		if m := strings.TrimSpace(r.PostFormValue("minCopies")); m != "" {
			if cs.minCopies, err = strconv.Atoi(m); err != nil || cs.minCopies < 1 || cs.minCopies > 1<<16 {
				return "", cs, fmt.Errorf("minimum copies: a number from 1")
			}
		}
		if _, err := topology.ParseWritePolicy(cs.writePolicy, cs.minCopies); err != nil {
			return "", cs, fmt.Errorf("write policy: %v", err)
		}
	default:
		return "", cs, fmt.Errorf("write policy: strict or degraded")
	}
	return name, cs, nil
}

// script is the cluster.configure command of the settings ("" none).
func (cs collectionSettings) script(name string) string {
	args := []string{"cluster.configure", "-collection", name}
	if cs.replication != "" {
		args = append(args, "-replication", cs.replication)
	}
	if cs.ec != "" {
		args = append(args, "-ec", cs.ec)
	}
	if cs.writePolicy != "" {
		args = append(args, "-writePolicy", cs.writePolicy)
	}
	if cs.minCopies != 0 {
		args = append(args, "-minCopies", strconv.Itoa(cs.minCopies))
	}
	if len(args) == 3 {
		return ""
	}
	return "lock; " + strings.Join(args, " ") + "; unlock"
}

// createCollection commits the collection's settings (cluster.configure
// under the admin lock: replication, EC scheme, write policy), then has
// the master grow its first volumes: a collection exists through its
// volumes.
func (u *UI) createCollection(w http.ResponseWriter, r *http.Request, id identity) {
	name, cs, err := parseCollectionForm(r)
	if err != nil {
		u.render(w, r, http.StatusBadRequest, "error", id, "Bad request", map[string]any{"Message": err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), createTimeout)
	defer cancel()
	var out bytes.Buffer
	if script := cs.script(name); script != "" {
		owner := fmt.Sprintf("admin UI on %s (%s)", u.cfg.Source.HTTPAddr(), id.user)
		if err := u.cfg.Source.RunShell(ctx, owner, &out, script); err != nil {
			u.render(w, r, http.StatusConflict, "error", id, "Not created", map[string]any{"Message": "the settings were not committed: " + err.Error() + "\n" + out.String()})
			return
		}
	}
	ids, err := u.cfg.Source.GrowVolumes(ctx, name, cs.replication)
	if err != nil {
		u.render(w, r, http.StatusConflict, "error", id, "Not created", map[string]any{"Message": "no volume could be grown for " + name + ": " + err.Error()})
		return
	}
	u.log.Info("collection created", "user", id.user, "collection", name, "volumes", ids)
	u.render(w, r, http.StatusOK, "collections", id, "Collections", map[string]any{"Collections": u.collections(),
		"Created": map[string]any{"Name": name, "Volumes": ids, "Settings": out.String()}})
}
