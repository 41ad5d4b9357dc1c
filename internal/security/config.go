package security

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// ConfigFlag is the flag naming the security configuration file.
const ConfigFlag = "security.config"

// ApplyConfigFile sets the flags of fs from the security configuration file
// at path (TOML, or YAML when it ends in .yaml or .yml). Its keys are flag
// names; nested tables or maps join their keys with dots ([tls] cert = ...
// is tls.cert). A flag given on the command line keeps its value: the file
// only sets the others. A key naming no flag of fs is an error, as is a value
// the flag does not accept. Lists become comma-separated values.
func ApplyConfigFile(path string, fs *pflag.FlagSet) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", ConfigFlag, err)
	}
	var raw map[string]any
	switch strings.ToLower(filepath.Ext(path)) {
	case ".yaml", ".yml":
		err = yaml.Unmarshal(data, &raw)
	default:
		err = toml.Unmarshal(data, &raw)
	}
	if err != nil {
		return fmt.Errorf("--%s %s: %w", ConfigFlag, path, err)
	}
	flat := map[string]string{}
	if err := flatten("", raw, flat); err != nil {
		return fmt.Errorf("--%s %s: %w", ConfigFlag, path, err)
	}
	keys := make([]string, 0, len(flat))
	for k := range flat {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || k == ConfigFlag {
			return fmt.Errorf("--%s %s: unknown key %q (keys are the flag names of this command)", ConfigFlag, path, k)
		}
		if f.Changed {
			continue
		}
		if err := fs.Set(k, flat[k]); err != nil {
			return fmt.Errorf("--%s %s: key %q: %w", ConfigFlag, path, k, err)
		}
	}
	return nil
}

func flatten(prefix string, v any, out map[string]string) error {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if err := flatten(key, sub, out); err != nil {
				return err
			}
		}
		return nil
	case []any:
		items := make([]string, 0, len(v))
		for _, it := range v {
			switch it.(type) {
			case map[string]any, []any:
				return fmt.Errorf("key %q: a list may hold only plain values", prefix)
			}
			items = append(items, fmt.Sprint(it))
		}
		out[prefix] = strings.Join(items, ",")
		return nil
	case nil:
		return fmt.Errorf("key %q has no value", prefix)
	default:
		out[prefix] = fmt.Sprint(v)
		return nil
	}
}
