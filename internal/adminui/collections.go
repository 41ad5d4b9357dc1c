package adminui

import (
	"cmp"
	"net/http"
	"slices"
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
