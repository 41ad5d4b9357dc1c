package shell

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

func fsCommands() []command {
	return []command{
		{name: "fs.quota", summary: "show, set or remove a filer directory's quota (bytes and entries): -path=/x [-bytes=N] [-files=N] [-remove]", setup: setupFSQuota},
	}
}

type quotaJSON struct {
	Path      string `json:"path"`
	MaxBytes  int64  `json:"maxBytes"`
	MaxFiles  int64  `json:"maxFiles"`
	UsedBytes int64  `json:"usedBytes"`
	UsedFiles int64  `json:"usedFiles"`
}

func setupFSQuota(fs *flag.FlagSet) runFunc {
	filer := fs.String("filer", "127.0.0.1:8888", "filer HTTP address host:port")
	p := fs.String("path", "", "filer directory (required)")
	bytes := fs.String("bytes", "", "limit of the bytes stored below the directory (0: unlimited); with -files or alone, sets the quota")
	files := fs.String("files", "", "limit of the entries below the directory (0: unlimited)")
	remove := fs.Bool("remove", false, "remove the quota")
	list := fs.Bool("list", false, "list every quota at or below -path (default /)")
	return func(ctx context.Context, s *Shell, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *p == "" && *list {
			*p = "/"
		}
		if *p == "" || !strings.HasPrefix(*p, "/") {
			return errors.New("fs.quota: -path=/dir is required (an absolute filer path)")
		}
		q := url.Values{"op": {"quota"}}
		method := http.MethodGet
		switch {
		case *list:
			q.Set("list", "true")
		case *remove:
			method = http.MethodPost
			q.Set("remove", "true")
		case *bytes != "" || *files != "":
			method = http.MethodPost
			for name, v := range map[string]string{"bytes": *bytes, "files": *files} {
				if v == "" {
					continue
				}
				n, err := parseSize(v)
				if err != nil {
					return fmt.Errorf("fs.quota: -%s=%q: %v", name, v, err)
				}
				q.Set(name, strconv.FormatInt(n, 10))
			}
		}
		u := "http://" + *filer + (&url.URL{Path: *p}).EscapedPath() + "?" + q.Encode()
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("fs.quota: filer %s: %w", *filer, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<22))
		if resp.StatusCode >= 300 {
			var e struct{ Error string }
			json.Unmarshal(body, &e)
			return fmt.Errorf("fs.quota: %s: %s", resp.Status, e.Error)
		}
		if *remove {
			fmt.Fprintf(s.out, "quota of %s removed\n", *p)
			return nil
		}
		var qs []quotaJSON
		if *list {
			var l struct{ Quotas []quotaJSON }
			if err := json.Unmarshal(body, &l); err != nil {
				return err
			}
			qs = l.Quotas
		} else {
			var one quotaJSON
			if err := json.Unmarshal(body, &one); err != nil {
				return err
			}
			qs = []quotaJSON{one}
		}
		for _, x := range qs {
			fmt.Fprintf(s.out, "%s: bytes %s of %s, entries %d of %s\n", x.Path, bytesString(uint64(x.UsedBytes)), limitString(x.MaxBytes, true), x.UsedFiles, limitString(x.MaxFiles, false))
		}
		if len(qs) == 0 {
			fmt.Fprintln(s.out, "no quotas")
		}
		return nil
	}
}

func limitString(n int64, isBytes bool) string {
	switch {
	case n == 0:
		return "unlimited"
	case isBytes:
		return bytesString(uint64(n))
	}
	return strconv.FormatInt(n, 10)
}

// parseSize reads a count with an optional K, M, G, T suffix (powers of 1024).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	if n := len(s); n > 0 {
		switch strings.ToUpper(s[n-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, errors.New("want a count >= 0, with an optional K, M, G or T suffix")
	}
	return v * mult, nil
}
