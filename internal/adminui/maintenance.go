package adminui

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kelpfs/kelp/internal/shell"
)

// Maintenance runs the admin shell's commands through the master's
// RunShell (the path the automatic EC rebuild takes), always under the
// admin lock: first the dry run, which prints the plan, then, from the
// plan's page, the same command with -force. A job runs in the
// background; its page shows the output so far and refreshes itself
// while it runs (no JavaScript needed).

// operation is one maintenance action.
type operation struct {
	Key, Label, Command string
	// Collection: the command takes -collection.
	Collection bool
	// Threshold: the command takes -garbageThreshold.
	Threshold bool
	// LocalPlan: the command has no dry run of its own; the plan is
	// computed here from the topology.
	LocalPlan bool
	// Confirm: the form must repeat the collection as "confirm" (a
	// destructive command); Hidden: started from another page (not listed
	// on the maintenance page).
	Confirm, Hidden bool
	Help            string
}

var operations = []operation{
	{Key: "fix-replication", Label: "Fix replication", Command: "volume.fix.replication", Collection: true,
		Help: "copy under-replicated volumes, remove misplaced or extra copies"},
	{Key: "balance", Label: "Balance", Command: "volume.balance",
		Help: "even out how full the servers are, within the placement rules"},
	{Key: "vacuum", Label: "Vacuum", Command: "volume.vacuum", Collection: true, Threshold: true, LocalPlan: true,
		Help: "compact volumes whose garbage ratio is at least the threshold"},
	{Key: "ec-encode", Label: "EC encode", Command: "ec.encode", Collection: true,
		Help: "erasure-code sealed volumes, then delete their copies"},
	{Key: "ec-rebuild", Label: "EC rebuild", Command: "ec.rebuild", Collection: true,
		Help: "rebuild missing shards of EC volumes"},
	{Key: "ec-balance", Label: "EC balance", Command: "ec.balance", Collection: true,
		Help: "spread each EC volume's shards evenly again"},
	{Key: "collection-delete", Label: "Delete collection", Command: "collection.delete", Collection: true, Confirm: true, Hidden: true,
		Help: "delete every volume and EC shard of a collection on every server"},
}

func findOperation(key string) (operation, bool) {
	i := slices.IndexFunc(operations, func(o operation) bool { return o.Key == key })
	if i < 0 {
		return operation{}, false
	}
	return operations[i], true
}

type job struct {
	ID        string
	Op        operation
	Apply     bool
	Script    string
	User      string
	Params    map[string]string
	Started   time.Time
	mu        sync.Mutex
	out       bytes.Buffer
	done      bool
	err       error
	Finished  time.Time
	localPlan string
	// progress is the shell's figures (shell.ProgressReporter); zero
	// Unit: the command reported none (a dry run, vacuum).
	progress shell.Progress
}

// ReportProgress takes the shell's figures while the command applies a plan.
func (j *job) ReportProgress(p shell.Progress) {
	j.mu.Lock()
	j.progress = p
	j.mu.Unlock()
}

func (j *job) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.out.Len() > 4<<20 {
		return len(p), nil // keep the page bounded; the command goes on
	}
	return j.out.Write(p)
}

// jobView is a job as a page shows it.
type jobView struct {
	*job
	Output  string
	Done    bool
	Error   string
	Elapsed time.Duration
	// Progress is nil when the command reported no figures.
	Progress *progressView
}

// progressView is a plan's advance in figures.
type progressView struct {
	shell.Progress
	Percent int
	// BytesPerSec is the average rate since the job started.
	BytesPerSec uint64
}

func newProgressView(p shell.Progress, elapsed time.Duration) *progressView {
	if p.Unit == "" {
		return nil
	}
	v := &progressView{Progress: p, Percent: 100}
	if p.Total > 0 {
		v.Percent = min(100, 100*p.Done/p.Total)
	}
	if secs := elapsed.Seconds(); secs > 0 {
		v.BytesPerSec = uint64(float64(p.Bytes) / secs)
	}
	return v
}

func (v jobView) refresh() int {
	if v.Done {
		return 0
	}
	return 1
}

func (j *job) view(now time.Time) jobView {
	j.mu.Lock()
	defer j.mu.Unlock()
	v := jobView{job: j, Output: j.out.String(), Done: j.done}
	if j.done {
		now = j.Finished
	}
	v.Elapsed = max(0, now.Sub(j.Started)).Round(time.Second)
	v.Progress = newProgressView(j.progress, now.Sub(j.Started))
	if j.err != nil {
		v.Error = j.err.Error()
	}
	return v
}

type jobs struct {
	mu    sync.Mutex
	seq   int
	byID  map[string]*job
	order []string
}

const keepJobs = 50

func (js *jobs) add(j *job) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.seq++
	j.ID = strconv.Itoa(js.seq)
	js.byID[j.ID] = j
	js.order = append(js.order, j.ID)
	if len(js.order) > keepJobs {
		delete(js.byID, js.order[0])
		js.order = js.order[1:]
	}
}

func (js *jobs) get(id string) *job {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.byID[id]
}

func (js *jobs) list(now time.Time) []jobView {
	js.mu.Lock()
	ids := slices.Clone(js.order)
	js.mu.Unlock()
	var out []jobView
	for i := len(ids) - 1; i >= 0; i-- {
		if j := js.get(ids[i]); j != nil {
			out = append(out, j.view(now))
		}
	}
	return out
}

var collectionRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{0,128}$`)

func (u *UI) maintenancePage(w http.ResponseWriter, r *http.Request, id identity) {
	u.render(w, r, http.StatusOK, "maintenance", id, "Maintenance", map[string]any{
		"Operations": operations, "Jobs": u.jobs.list(u.cfg.Now()),
	})
}

// startJob validates the form, starts the command and sends the browser
// to the job's page.
func (u *UI) startJob(w http.ResponseWriter, r *http.Request, id identity) {
	bad := func(msg string) {
		u.render(w, r, http.StatusBadRequest, "error", id, "Bad request", map[string]any{"Message": msg})
	}
	op, ok := findOperation(r.PostFormValue("op"))
	if !ok {
		bad("unknown operation " + strconv.Quote(r.PostFormValue("op")))
		return
	}
	apply := r.PostFormValue("apply") == "1"
	params := map[string]string{}
	args := []string{op.Command}
	if c := strings.TrimSpace(r.PostFormValue("collection")); c != "" && op.Collection {
		if !collectionRe.MatchString(c) {
			bad("a collection name has letters, digits, '_', '.' and '-' only")
			return
		}
		params["collection"] = c
		args = append(args, "-collection", c)
	}
	if op.Confirm {
		c := params["collection"]
		if c == "" {
			bad(op.Label + " needs a collection (the default collection cannot be deleted)")
			return
		}
		if r.PostFormValue("confirm") != c {
			bad("type the collection's name to confirm")
			return
		}
		params["confirm"] = c // the plan's apply button repeats it
	}
	threshold := 0.3
	if op.Threshold {
		if t := strings.TrimSpace(r.PostFormValue("garbageThreshold")); t != "" {
			f, err := strconv.ParseFloat(t, 64)
			if err != nil || f < 0 || f > 1 {
				bad("the garbage threshold is a number from 0 to 1")
				return
			}
			threshold = f
		}
		params["garbageThreshold"] = strconv.FormatFloat(threshold, 'f', -1, 64)
		args = append(args, "-garbageThreshold", params["garbageThreshold"])
	}
	if apply && !op.LocalPlan {
		args = append(args, "-force")
	}
	j := &job{Op: op, Apply: apply, User: id.user, Params: params, Started: u.cfg.Now()}
	if !apply && op.LocalPlan {
		j.Script = "(plan from the topology)"
		j.localPlan = u.vacuumPlan(params["collection"], threshold)
	} else {
		j.Script = "lock; " + strings.Join(args, " ") + "; unlock"
	}
	u.jobs.add(j)
	u.log.Info("maintenance", "job", j.ID, "user", id.user, "script", j.Script)
	go u.run(j)
	http.Redirect(w, r, "/maintenance/jobs/"+j.ID, http.StatusSeeOther)
}

// jobTimeout bounds one maintenance command.
const jobTimeout = 6 * time.Hour

func (u *UI) run(j *job) {
	var err error
	if j.localPlan != "" || (!j.Apply && j.Op.LocalPlan) {
		j.Write([]byte(j.localPlan))
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
		owner := fmt.Sprintf("admin UI on %s (%s)", u.cfg.Source.HTTPAddr(), j.User)
		err = u.cfg.Source.RunShell(ctx, owner, j, j.Script)
		cancel()
	}
	j.mu.Lock()
	j.done, j.err, j.Finished = true, err, u.cfg.Now()
	j.mu.Unlock()
}

// vacuumPlan lists the volumes a vacuum with this threshold would compact.
func (u *UI) vacuumPlan(collection string, threshold float64) string {
	var b strings.Builder
	n := 0
	for _, row := range volumeRows(u.cfg.Source.TopologyStatus()) {
		if (collection != "" && row.Collection != collection) || row.Garbage < threshold || row.Size == 0 {
			continue
		}
		n++
		fmt.Fprintf(&b, "volume %d (%s): garbage %.0f%% of %s on %s\n", row.ID, cmpOr(row.Collection, "default collection"),
			100*row.Garbage, bytesString(row.Size), strings.Join(row.Servers, ", "))
	}
	fmt.Fprintf(&b, "%d volume(s) at or above %.0f%% garbage would be vacuumed\n", n, 100*threshold)
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (u *UI) jobPage(w http.ResponseWriter, r *http.Request, id identity) {
	j := u.jobs.get(r.PathValue("id"))
	if j == nil {
		u.render(w, r, http.StatusNotFound, "error", id, "Not found", map[string]any{"Message": "no such job (only the last 50 are kept)"})
		return
	}
	u.render(w, r, http.StatusOK, "job", id, j.Op.Label, j.view(u.cfg.Now()))
}
