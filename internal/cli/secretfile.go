package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// loadOrCreateSecret reads the JSON file at path into v; when there is
// none, it calls generate to fill v and stores it (mode 0600: it holds a
// secret). A file that does not decode, or that valid refuses, is an error:
// it is never overwritten. created says which happened.
func loadOrCreateSecret(path string, v any, valid func() bool, generate func()) (created bool, err error) {
	b, err := os.ReadFile(path)
	if err == nil {
		if err := json.Unmarshal(b, v); err != nil || !valid() {
			return false, errors.New(path + " is not a valid credentials file; remove it to generate new credentials")
		}
		return false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	generate()
	b, _ = json.MarshalIndent(v, "", "  ")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	return true, os.WriteFile(path, append(b, '\n'), 0o600)
}
