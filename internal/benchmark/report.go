package benchmark

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Phase is the result of one phase. The JSON names are part of `kelp
// benchmark --json`'s output, which scripts parse: do not rename them.
type Phase struct {
	Requests       int     `json:"requests"`
	Failed         int     `json:"failed"`
	RequestsPerSec float64 `json:"requests_per_sec"` // successful requests per second
	MBPerSec       float64 `json:"mb_per_sec"`       // 10^6 bytes per second, successful requests
	P50Ms          float64 `json:"p50_ms"`
	P90Ms          float64 `json:"p90_ms"`
	P99Ms          float64 `json:"p99_ms"`
	MaxMs          float64 `json:"max_ms"`
	Seconds        float64 `json:"seconds"`
	// FirstError is the first failure's message, for the text report.
	FirstError string `json:"-"`
}

// Report is the result of a run.
type Report struct {
	Write Phase `json:"write"`
	Read  Phase `json:"read"`
}

// Failed is the number of failed requests in both phases; a CLI exits
// non-zero when it is not 0.
func (r *Report) Failed() int { return r.Write.Failed + r.Read.Failed }

// Err is nil when no request failed, else an error that counts the
// failures and gives the first one: what `kelp benchmark` exits with.
func (r *Report) Err() error {
	return FailuresErr([]string{"write", "read"}, []Phase{r.Write, r.Read})
}

// FailuresErr is Report.Err for any phases, names[i] naming phases[i].
func FailuresErr(names []string, phases []Phase) error {
	failed, total, first := 0, 0, ""
	for i, p := range phases {
		failed += p.Failed
		total += p.Requests
		if first == "" && p.FirstError != "" {
			first = names[i] + ": " + p.FirstError
		}
	}
	if failed == 0 {
		return nil
	}
	return fmt.Errorf("%w: %d of %d requests; the first: %s", ErrRequestsFailed, failed, total, first)
}

// ErrRequestsFailed is returned (wrapped) by Report.Err.
var ErrRequestsFailed = errors.New("benchmark: requests failed")

// summarize turns per-request latencies (ns, -1 for a failure) into a Phase.
// It sorts lat in place.
func summarize(lat []int64, failed int, moved int64, elapsed time.Duration) Phase {
	p := Phase{Requests: len(lat), Failed: failed, Seconds: round3(elapsed.Seconds())}
	ok := lat[:0]
	for _, l := range lat {
		if l >= 0 {
			ok = append(ok, l)
		}
	}
	if len(ok) == 0 {
		return p
	}
	slices.Sort(ok)
	if s := elapsed.Seconds(); s > 0 {
		p.RequestsPerSec = round3(float64(len(ok)) / s)
		p.MBPerSec = round3(float64(moved) / 1e6 / s)
	}
	p.P50Ms = percentileMs(ok, 0.50)
	p.P90Ms = percentileMs(ok, 0.90)
	p.P99Ms = percentileMs(ok, 0.99)
	p.MaxMs = round3(float64(ok[len(ok)-1]) / 1e6)
	return p
}

// percentileMs is the nearest-rank percentile of sorted, in milliseconds.
func percentileMs(sorted []int64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return round3(float64(sorted[i]) / 1e6)
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// writeJSON prints the report as one line, the last of the output.
func (r *Report) writeJSON(out io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("benchmark: encoding report: %w", err)
	}
	b = append(b, '\n')
	if _, err := out.Write(b); err != nil {
		return fmt.Errorf("benchmark: writing report: %w", err)
	}
	return nil
}
