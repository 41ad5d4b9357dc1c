package webdav

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strings"

	xwebdav "golang.org/x/net/webdav"

	"github.com/kelpfs/kelp/internal/fsview"
)

// Dead properties (PROPPATCH) are extended attributes of the file or
// collection: "user.dav:{namespace}local" holds {"xml": inner XML, "lang":
// xml:lang} as JSON. So they persist in the filer, show in PROPFIND
// (named, allprop, propname), and a mount sees them with getfattr.

const deadPropPrefix = "user.dav:"

type storedProp struct {
	XML  string `json:"xml"`
	Lang string `json:"lang,omitempty"`
}

func propKey(n xml.Name) string { return deadPropPrefix + "{" + n.Space + "}" + n.Local }

func parsePropKey(k string) (xml.Name, bool) {
	rest, ok := strings.CutPrefix(k, deadPropPrefix+"{")
	if !ok {
		return xml.Name{}, false
	}
	i := strings.LastIndexByte(rest, '}')
	if i < 0 || i == len(rest)-1 {
		return xml.Name{}, false
	}
	return xml.Name{Space: rest[:i], Local: rest[i+1:]}, true
}

// deadProps reads the dead properties of view path name.
func deadProps(ctx context.Context, v *fsview.FS, name string) (map[xml.Name]xwebdav.Property, error) {
	keys, err := v.ListXattr(ctx, name)
	if err != nil {
		return nil, osErr("propfind", name, err)
	}
	out := map[xml.Name]xwebdav.Property{}
	for _, k := range keys {
		n, ok := parsePropKey(k)
		if !ok {
			continue
		}
		b, err := v.GetXattr(ctx, name, k)
		if err != nil {
			continue // removed meanwhile
		}
		var sp storedProp
		if json.Unmarshal(b, &sp) != nil {
			continue
		}
		out[n] = xwebdav.Property{XMLName: n, Lang: sp.Lang, InnerXML: []byte(sp.XML)}
	}
	return out, nil
}

// patchProps applies a PROPPATCH in one filer update.
func patchProps(ctx context.Context, v *fsview.FS, name string, patches []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	set := map[string][]byte{}
	var remove []string
	st := xwebdav.Propstat{Status: http.StatusOK}
	for _, p := range patches {
		for _, prop := range p.Props {
			k := propKey(prop.XMLName)
			if p.Remove {
				delete(set, k)
				remove = append(remove, k)
			} else {
				b, err := json.Marshal(storedProp{XML: string(prop.InnerXML), Lang: prop.Lang})
				if err != nil {
					return nil, err
				}
				set[k] = b
			}
			st.Props = append(st.Props, xwebdav.Property{XMLName: prop.XMLName})
		}
	}
	if err := v.PatchXattrs(ctx, name, set, remove); err != nil {
		return nil, osErr("proppatch", name, err)
	}
	return []xwebdav.Propstat{st}, nil
}

func (f *file) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return deadProps(context.Background(), f.v, f.name)
}

func (f *file) Patch(p []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return patchProps(context.Background(), f.v, f.name, p)
}

func (d *dir) DeadProps() (map[xml.Name]xwebdav.Property, error) {
	return deadProps(context.Background(), d.v, d.name)
}

func (d *dir) Patch(p []xwebdav.Proppatch) ([]xwebdav.Propstat, error) {
	return patchProps(context.Background(), d.v, d.name, p)
}

var (
	_ xwebdav.DeadPropsHolder = (*file)(nil)
	_ xwebdav.DeadPropsHolder = (*dir)(nil)
)
