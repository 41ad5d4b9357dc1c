package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kelpfs/kelp/internal/security"
)

// newHealthCommand is `kelp health URL`: exit 0 when URL answers a GET with
// a 2xx status. Container healthchecks use it: the image is FROM scratch,
// with no shell or curl.
func newHealthCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "health URL",
		Short: "Exit 0 when URL (e.g. http://127.0.0.1:9333/healthz) answers GET with a 2xx status",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			url := args[0]
			if !strings.Contains(url, "://") {
				url = security.URL(url)
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return fmt.Errorf("health: %w", err)
			}
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = security.Process().ClientConfig() // nil: TLS off
			resp, err := (&http.Client{Transport: tr}).Do(req)
			if err != nil {
				return fmt.Errorf("health: %w", err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("health: %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}
