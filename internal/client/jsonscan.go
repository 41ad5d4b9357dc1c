package client

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The answers on the hot path (assign, upload, errors) are small flat JSON
// objects. encoding/json decodes them through reflection, which costs more
// than the rest of the client's work per request; scanFlat reads them
// directly. Anything it does not handle (escapes, nested values, odd
// syntax) makes it report false, and the caller falls back to encoding/json,
// so correctness never depends on the fast path.

// scanFlat calls fn for each member of a JSON object whose values are strings
// without escapes, numbers, booleans or null. For strings val excludes the
// quotes. It returns false if data is not such an object.
func scanFlat(data []byte, fn func(key, val []byte, isString bool)) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		key, j, ok := scanString(data, i)
		if !ok || !plainKey(key) {
			return false
		}
		i = skipSpace(data, j)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipSpace(data, i+1)
		if i >= len(data) {
			return false
		}
		var val []byte
		isString := data[i] == '"'
		if isString {
			val, j, ok = scanString(data, i)
			if !ok || !utf8.Valid(val) {
				return false
			}
		} else {
			j = i
			for j < len(data) && isLiteralByte(data[j]) {
				j++
			}
			if j == i {
				return false // '{', '[' or garbage
			}
			val = data[i:j]
		}
		fn(key, val, isString)
		i = skipSpace(data, j)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// scanString reads a string starting at data[i] == '"' and returns its
// contents and the index after the closing quote. Escapes and control
// characters are refused rather than decoded.
func scanString(data []byte, i int) ([]byte, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(data); j++ {
		switch c := data[j]; {
		case c == '"':
			return data[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// plainKey refuses keys that encoding/json might match to a field by its
// case-insensitive rule (it would read "Count" into Count): non-ASCII keys and
// keys that differ from a field name only in case. Such answers go the slow way.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c >= 0x80 {
			return false
		}
	}
	// The field names of every answer decoded with scanFlat.
	knownKeys := [...]string{"fid", "url", "publicUrl", "count", "error", "leader", "name", "size", "eTag"}
	for _, name := range knownKeys {
		if len(key) == len(name) && string(key) != name && strings.EqualFold(string(key), name) {
			return false
		}
	}
	return true
}

func isLiteralByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\n' || data[i] == '\r' || data[i] == '\t') {
		i++
	}
	return i
}

// literalNumber parses a non-string value as a number.
func literalNumber(val []byte) (float64, bool) {
	f, err := strconv.ParseFloat(string(val), 64)
	return f, err == nil
}

// validLiteral reports whether a non-string value is a number, true, false or null.
func validLiteral(val []byte) bool {
	switch string(val) {
	case "true", "false", "null":
		return true
	}
	_, ok := literalNumber(val)
	return ok
}

// scanFields scans a flat object with set, which stores one member and
// reports whether its value had the expected type. It reports false (the
// caller then falls back to encoding/json) for anything scanFlat cannot
// read, a non-string value that is not a JSON literal, or a value set
// refused.
func scanFields(data []byte, set func(key, val []byte, isString bool) bool) bool {
	good := true
	ok := scanFlat(data, func(key, val []byte, isString bool) {
		if good && ((!isString && !validLiteral(val)) || !set(key, val, isString)) {
			good = false
		}
	})
	return ok && good
}

// assignAnswer is the master's /dir/assign answer.
type assignAnswer struct {
	FID       string `json:"fid"`
	URL       string `json:"url"`
	PublicURL string `json:"publicUrl"`
	Count     uint64 `json:"count"`
	Auth      string `json:"auth"`
	Error     string `json:"error"`
}

func decodeAssignAnswer(data []byte, a *assignAnswer) error {
	ok := scanFields(data, func(key, val []byte, isString bool) bool {
		switch string(key) {
		case "fid":
			a.FID = string(val)
		case "url":
			a.URL = string(val)
		case "publicUrl":
			a.PublicURL = string(val)
		case "auth":
			a.Auth = string(val)
		case "error":
			a.Error = string(val)
		case "count":
			n, err := strconv.ParseUint(string(val), 10, 64)
			a.Count = n
			return !isString && err == nil
		default:
			return true
		}
		return isString
	})
	if ok {
		return nil
	}
	*a = assignAnswer{}
	return json.Unmarshal(data, a)
}

// uploadAnswer is a volume server's answer to a write.
type uploadAnswer struct {
	Name  string `json:"name"`
	Size  int64  `json:"size"`
	ETag  string `json:"eTag"`
	Error string `json:"error"`
}

func decodeUploadAnswer(data []byte, a *uploadAnswer) error {
	ok := scanFields(data, func(key, val []byte, isString bool) bool {
		switch string(key) {
		case "name":
			a.Name = string(val)
		case "eTag":
			a.ETag = string(val)
		case "error":
			a.Error = string(val)
		case "size":
			n, err := strconv.ParseInt(string(val), 10, 64)
			a.Size = n
			return !isString && err == nil
		default:
			return true
		}
		return isString
	})
	if ok {
		return nil
	}
	*a = uploadAnswer{}
	return json.Unmarshal(data, a)
}

// errorAnswer is the body of any error answer; Leader is set by a master
// follower that knows the leader.
type errorAnswer struct {
	Error  string `json:"error"`
	Leader string `json:"leader"`
}

// decodeErrorAnswer reports whether data was a JSON error object.
func decodeErrorAnswer(data []byte, a *errorAnswer) bool {
	bad := false
	ok := scanFlat(data, func(key, val []byte, isString bool) {
		switch string(key) {
		case "error":
			a.Error, bad = string(val), bad || !isString
		case "leader":
			a.Leader, bad = string(val), bad || !isString
		}
	})
	if ok && !bad {
		return true
	}
	*a = errorAnswer{}
	return json.Unmarshal(data, a) == nil
}
