package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// filerClient is the part of the filer's HTTP API the driver uses.
type filerClient struct {
	base string // http://host:port
	hc   *http.Client
}

var errNotFound = errors.New("not found")

type quota struct {
	Path      string `json:"path"`
	MaxBytes  int64  `json:"maxBytes"`
	MaxFiles  int64  `json:"maxFiles"`
	UsedBytes int64  `json:"usedBytes"`
	UsedFiles int64  `json:"usedFiles"`
}

func (c *filerClient) do(ctx context.Context, method, p string, q url.Values, out any) error {
	u := c.base + (&url.URL{Path: p}).EscapedPath()
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<22))
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("%w: %s", errNotFound, p)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("filer %s %s: %s: %s", method, p, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *filerClient) healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

func (c *filerClient) mkdir(ctx context.Context, p string) error {
	return c.do(ctx, http.MethodPost, p, url.Values{"op": {"mkdir"}}, nil)
}

func (c *filerClient) getQuota(ctx context.Context, p string) (*quota, error) {
	var q quota
	if err := c.do(ctx, http.MethodGet, p, url.Values{"op": {"quota"}}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

func (c *filerClient) setQuota(ctx context.Context, p string, bytes int64) (*quota, error) {
	var q quota
	if err := c.do(ctx, http.MethodPost, p, url.Values{"op": {"quota"}, "bytes": {strconv.FormatInt(bytes, 10)}}, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

func (c *filerClient) removeAll(ctx context.Context, p string) error {
	err := c.do(ctx, http.MethodDelete, p, url.Values{"recursive": {"true"}}, nil)
	if errors.Is(err, errNotFound) {
		return nil
	}
	return err
}

type listing struct {
	Entries []struct {
		Name  string `json:"name"`
		IsDir bool   `json:"isDir"`
	} `json:"entries"`
	LastFileName string `json:"lastFileName"`
	More         bool   `json:"more"`
}

// list returns up to limit names of directories in dir after startAfter.
func (c *filerClient) list(ctx context.Context, dir, startAfter string, limit int) ([]string, bool, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if startAfter != "" {
		q.Set("lastFileName", startAfter)
	}
	var l listing
	if err := c.do(ctx, http.MethodGet, dir+"/", q, &l); err != nil {
		return nil, false, err
	}
	var out []string
	for _, e := range l.Entries {
		if e.IsDir {
			out = append(out, e.Name)
		}
	}
	return out, l.More, nil
}
