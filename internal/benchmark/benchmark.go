package benchmark

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/kelpfs/kelp/internal/auth"
	"github.com/kelpfs/kelp/internal/client"
	"github.com/kelpfs/kelp/internal/fid"
	"github.com/kelpfs/kelp/internal/security"
)

// ErrConfig is returned (wrapped) by Run for an unusable Config.
var ErrConfig = errors.New("benchmark: bad config")

// Config is what `kelp benchmark` was asked to do.
type Config struct {
	Masters     []string // master addresses; a comma-separated entry is split
	N           int      // files to write, then read
	Size        int      // bytes per file
	Concurrency int      // workers per phase; 0 means 16
	Collection  string
	Replication string
	// JSON adds, as the last line of Out, one JSON object with both phases.
	JSON bool
	// Out receives the report; nil discards it.
	Out io.Writer
	// Progress receives a progress bar per phase (usually os.Stderr); nil,
	// or an *os.File that is not a terminal, shows none.
	Progress io.Writer
	// AccessToken is shown to the masters when they need one ("" none).
	AccessToken string
	// HTTPClient overrides the client's tuned default (tests); it is used
	// for every request, as with NetHTTP.
	HTTPClient *http.Client
	// NetHTTP sends every request through the library client (net/http),
	// as before the lean client of rawhttp.go: for comparisons.
	NetHTTP bool
	// Logger receives the first failures of each phase; nil discards.
	Logger *slog.Logger
	// Seed makes file contents and read order repeatable; 0 picks one.
	Seed uint64
	// Cold empties the page cache between the write and the read phase
	// (DropCaches), so that reads come from disk, not from the memory the
	// writes just filled. It acts on the machine the benchmark runs on only.
	Cold bool
	// DropCaches is what Cold calls; nil means DropPageCache (Linux, root),
	// checked before the write phase starts.
	DropCaches func() error
	// Save, when set, is a file that receives the list of files written
	// (see files.go), so a later run can read the same files again.
	Save string
	// ReadsFrom, when set, skips the write phase and reads the files listed
	// in this file (written by Save) instead: the same reads again, e.g.
	// after `ec.encode` turned their volumes into EC volumes. N and Size
	// come from the file.
	ReadsFrom string
}

// written is what the write phase remembers of one file for the read phase.
type written struct {
	id  fid.FileID
	crc uint32
	ok  bool
}

// Run writes cfg.N files, reads them back, prints the report to cfg.Out and
// returns it. Failed requests are counted in the report, not returned as an
// error; an error means the benchmark could not run (bad config) or ctx
// ended, in which case the report so far is returned too.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = client.NewHTTPClient()
		// Keep one idle connection per worker and host, so that no request
		// pays for a TCP handshake once the pool is warm.
		if t, ok := hc.Transport.(*http.Transport); ok && t.MaxIdleConnsPerHost < 2*cfg.Concurrency {
			t.MaxIdleConnsPerHost = 2 * cfg.Concurrency
		}
	}
	// No retry of any kind: a request that fails is counted as failed, and
	// one that waited out an election would only hide the failure in its
	// latency.
	c, err := client.New(client.Config{Masters: cfg.Masters, HTTPClient: hc, Logger: cfg.Logger, MaxRetries: -1, MasterWait: -1,
		AccessToken: auth.Static(cfg.AccessToken)})
	if err != nil {
		return nil, fmt.Errorf("benchmark: %w", err)
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	var saved []written
	if cfg.ReadsFrom != "" {
		if saved, cfg.Size, err = loadFiles(cfg.ReadsFrom); err != nil {
			return nil, err
		}
		cfg.N = len(saved)
		cfg.Concurrency = min(cfg.Concurrency, max(cfg.N, 1))
	}
	fmt.Fprintf(cfg.Out, "Benchmark: %d files of %d bytes, concurrency %d, masters %s\n\n",
		cfg.N, cfg.Size, cfg.Concurrency, strings.Join(cfg.Masters, ","))

	b := &bench{c: c, cfg: cfg, crc: crc32.MakeTable(crc32.Castagnoli)}
	b.raw = !cfg.NetHTTP && cfg.HTTPClient == nil
	if b.raw {
		b.master = hostOf(cfg.Masters[0])
		if cfg.AccessToken != "" {
			b.masterAuth = "Authorization: Bearer " + cfg.AccessToken + "\r\n"
		}
		b.assignPath = client.AssignPath(client.AssignRequest{Collection: cfg.Collection, Replication: cfg.Replication})
	}
	rep := &Report{}
	files := make([]written, cfg.N)
	workers := make([]worker, cfg.Concurrency)
	for i := range workers {
		workers[i].id = i
		if b.raw {
			workers[i].raw = newRawConns(ctx, security.Process().ClientConfig())
		}
	}
	defer func() {
		for i := range workers {
			if workers[i].raw != nil {
				workers[i].raw.closeAll()
			}
		}
	}()
	phase := func(name string) PhaseOptions {
		return PhaseOptions{Name: name, Unit: "req", Concurrency: cfg.Concurrency, Progress: cfg.Progress, Logger: cfg.Logger}
	}
	if saved != nil {
		files = saved
		fmt.Fprintf(cfg.Out, "Reading the files listed in %s again (no write phase)\n\n", cfg.ReadsFrom)
	} else {
		rep.Write = RunPhase(ctx, phase("write"), cfg.N, func(w, i int) (int64, error) {
			n, err := workers[w].write(ctx, b, i, &files[i])
			return int64(n), err
		})
		PrintPhase(cfg.Out, "write", "requests", rep.Write)
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("benchmark: %w", err)
		}
		if cfg.Save != "" {
			if err := saveFiles(cfg.Save, cfg.Size, files); err != nil {
				return rep, err
			}
		}
	}

	if cfg.Cold {
		fmt.Fprintf(cfg.Out, "Dropping the page cache before reading (sync; echo 1 > /proc/sys/vm/drop_caches)\n\n")
		if err := cfg.DropCaches(); err != nil {
			return rep, err
		}
	}
	order := make([]int, 0, cfg.N)
	for i := range files {
		if files[i].ok {
			order = append(order, i)
		}
	}
	rand.New(rand.NewPCG(cfg.Seed, 1)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	rep.Read = RunPhase(ctx, phase("read"), len(order), func(w, i int) (int64, error) {
		n, err := workers[w].read(ctx, b, &files[order[i]])
		return int64(n), err
	})
	PrintPhase(cfg.Out, "read", "requests", rep.Read, ReadNote(cfg.Cold))
	if n := b.readsAgain.Load(); n > 0 {
		fmt.Fprintf(cfg.Out, "%d reads failed on the first server and were read again through the library client\n\n", n)
	}
	if cfg.JSON {
		if err := rep.writeJSON(cfg.Out); err != nil {
			return rep, err
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, fmt.Errorf("benchmark: %w", err)
	}
	return rep, nil
}

func (cfg *Config) normalize() error {
	var masters []string
	for _, m := range cfg.Masters {
		for _, a := range strings.Split(m, ",") {
			if a = strings.TrimSpace(a); a != "" {
				masters = append(masters, a)
			}
		}
	}
	cfg.Masters = masters
	switch {
	case len(cfg.Masters) == 0:
		return fmt.Errorf("%w: no master address", ErrConfig)
	case cfg.N <= 0 && cfg.ReadsFrom == "":
		return fmt.Errorf("%w: the number of files must be positive, got %d", ErrConfig, cfg.N)
	case cfg.Size < 0:
		return fmt.Errorf("%w: negative file size %d", ErrConfig, cfg.Size)
	case cfg.Concurrency < 0:
		return fmt.Errorf("%w: negative concurrency %d", ErrConfig, cfg.Concurrency)
	}
	if cfg.Cold && cfg.DropCaches == nil {
		if err := CheckDropPageCache(); err != nil {
			return err
		}
		cfg.DropCaches = DropPageCache
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 16
	}
	if cfg.ReadsFrom == "" {
		cfg.Concurrency = min(cfg.Concurrency, cfg.N)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// ReadNote says where the read phase's bytes came from. Files read right
// after they were written are still in the volume servers' page cache
// (unless the data set is larger than their memory), so a warm read phase
// measures memory and the network, not disks.
func ReadNote(cold bool) string {
	if cold {
		return "cold reads: the page cache was dropped after the writes (on this machine), reads come from disk"
	}
	return "warm reads: the files were just written and are served from the page cache, not disk (--cold drops it first)"
}

// bench is what every worker of a run shares, read-only.
type bench struct {
	c   *client.Client
	cfg Config
	crc *crc32.Table // CRC-32C, hardware-accelerated on amd64 and arm64

	// raw: requests go through the lean client (rawhttp.go); when the
	// first master does not assign but the library client, which finds
	// the leader, does, assigns go through the latter from then on.
	raw           bool
	master        string // "host:port" of the first master
	masterAuth    string // its Authorization header line, if any
	assignPath    string
	libraryAssign atomic.Bool
	readsAgain    atomic.Int64 // lean reads that failed and went through the library client
}

// hostOf strips a scheme and a trailing slash from an address.
func hostOf(addr string) string {
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	return strings.TrimRight(addr, "/")
}

// worker holds one goroutine's state: the random contents its files are
// made of and, on read, a buffer reused for every body.
type worker struct {
	id  int
	buf []byte // write: the contents template; read: Size+1 bytes, to catch a long body
	rng *rand.Rand

	raw  *rawConns         // the lean client's connections (b.raw)
	data []byte            // write, lean client: the file being written
	ans  []byte            // the lean client's answers to assign and upload
	locs map[uint32]rawLoc // read, lean client: the server read from, per volume
}

// write stores file i with exactly one assign and one upload.
func (w *worker) write(ctx context.Context, b *bench, i int, f *written) (int, error) {
	c, cfg := b.c, &b.cfg
	if w.buf == nil {
		w.buf = make([]byte, cfg.Size)
		w.rng = rand.New(rand.NewPCG(cfg.Seed, uint64(w.id)+2))
		var word [8]byte
		for j := 0; j < len(w.buf); j += 8 {
			binary.LittleEndian.PutUint64(word[:], w.rng.Uint64())
			copy(w.buf[j:], word[:])
		}
	}
	// Random bytes once per worker; the first 16 bytes differ per file (index
	// and fresh randomness), so no two files are equal and a read returning
	// the wrong file fails the checksum.
	//
	// Each file gets its own copy with net/http: it may still read a
	// request body after Do returns (when the server answered early), so a
	// buffer cannot be rewritten for the next file, and a body that is a
	// plain *bytes.Reader lets the transport send headers and body in one
	// write. The lean client is done with the body when it returns.
	var data []byte
	if b.raw {
		if w.data == nil {
			w.data = make([]byte, len(w.buf))
		}
		data = w.data
	} else {
		data = make([]byte, len(w.buf))
	}
	copy(data, w.buf)
	var stamp [16]byte
	binary.LittleEndian.PutUint64(stamp[:], uint64(i))
	binary.LittleEndian.PutUint64(stamp[8:], w.rng.Uint64())
	copy(data, stamp[:])
	f.crc = crc32.Checksum(data, b.crc)

	if b.raw {
		id, err := w.rawWrite(ctx, b, data)
		if err != nil {
			return 0, err
		}
		f.id, f.ok = id, true
		return len(data), nil
	}
	a, err := c.Assign(ctx, client.AssignRequest{Collection: cfg.Collection, Replication: cfg.Replication})
	if err != nil {
		return 0, err
	}
	if _, err := c.Upload(ctx, a.URL, a.FID, bytes.NewReader(data), int64(len(data)), client.UploadOptions{Auth: a.Auth}); err != nil {
		return 0, err
	}
	f.id, f.ok = a.FID, true
	return len(data), nil
}

// errMismatch marks a read whose size or checksum was wrong.
var errMismatch = errors.New("benchmark: read back different bytes")

// read fetches f and checks its size and checksum.
func (w *worker) read(ctx context.Context, b *bench, f *written) (int, error) {
	size := b.cfg.Size
	if len(w.buf) != size+1 { // nil, or the write phase's contents template
		w.buf = make([]byte, size+1)
	}
	if b.raw {
		n, again, err := w.rawRead(b, f)
		if !again {
			return n, err
		}
		// The read goes again through the library client, which tries the
		// volume's other servers and, for signed reads, asks for a token:
		// what a read through it would have done.
		b.readsAgain.Add(1)
	}
	rc, _, err := b.c.Get(ctx, f.id, nil)
	if err != nil {
		return 0, err
	}
	n, err := readFull(rc, w.buf)
	rc.Close()
	if err != nil {
		return 0, fmt.Errorf("benchmark: reading %s: %w", f.id, err)
	}
	if n != size {
		return 0, fmt.Errorf("%w: %s has %d+ bytes, want %d", errMismatch, f.id, n, size)
	}
	if crc32.Checksum(w.buf[:n], b.crc) != f.crc {
		return 0, fmt.Errorf("%w: %s checksum", errMismatch, f.id)
	}
	return n, nil
}

// readFull reads r until EOF or until buf is full; EOF is not an error.
func readFull(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// rawWrite is write's assign and upload through the lean client.
func (w *worker) rawWrite(ctx context.Context, b *bench, data []byte) (fid.FileID, error) {
	if w.ans == nil {
		w.ans = make([]byte, 4<<10)
	}
	var a client.Assignment
	var err error
	follower := false
	if !b.libraryAssign.Load() {
		var ans rawAnswer
		ans, err = w.raw.do(b.master, "GET", b.assignPath, b.masterAuth, nil, w.ans)
		switch {
		case err != nil:
			return fid.FileID{}, fmt.Errorf("benchmark: assign from %s: %w: %w", b.master, client.ErrNoMaster, err)
		case ans.status == http.StatusOK && ans.length == int64(ans.n):
			if a, err = client.ParseAssignAnswer(w.ans[:ans.n]); err != nil {
				return fid.FileID{}, err
			}
		case ans.status == http.StatusOK:
			return fid.FileID{}, fmt.Errorf("benchmark: assign from %s: an answer of %d bytes", b.master, ans.length)
		default: // a redirect, or an error naming the leader
			follower = ans.status/100 == 3 || bytes.Contains(w.ans[:ans.n], []byte(`"leader"`))
		}
	}
	if a.URL == "" {
		// The first master did not assign (a follower, no writable volume
		// yet, an error): ask through the library client, which follows
		// redirects and leader hints and reports errors as usual. When
		// that master is a follower, assigns go through the library from
		// now on.
		if a, err = b.c.Assign(ctx, client.AssignRequest{Collection: b.cfg.Collection, Replication: b.cfg.Replication}); err != nil {
			return fid.FileID{}, err
		}
		if follower {
			b.libraryAssign.Store(true)
		}
	}
	headers := "Content-Type: application/octet-stream\r\n"
	if a.Auth != "" {
		headers += "Authorization: Bearer " + a.Auth + "\r\n"
	}
	host, target := hostOf(a.URL), "/"+a.FID.String()
	ans, err := w.raw.do(host, "PUT", target, headers, data, w.ans)
	if err != nil {
		return fid.FileID{}, fmt.Errorf("benchmark: upload %s to %s: %w", a.FID, host, err)
	}
	body := w.ans[:ans.n]
	if ans.status != http.StatusCreated && ans.status != http.StatusOK {
		return fid.FileID{}, fmt.Errorf("benchmark: upload %s to %s: %d %s: %s", a.FID, host, ans.status,
			http.StatusText(ans.status), bytes.TrimSpace(body))
	}
	if ans.length != int64(ans.n) {
		return fid.FileID{}, fmt.Errorf("benchmark: upload %s to %s: an answer of %d bytes", a.FID, host, ans.length)
	}
	res, err := client.ParseUploadAnswer(body)
	if err != nil {
		return fid.FileID{}, err
	}
	if res.Size != int64(len(data)) {
		return fid.FileID{}, fmt.Errorf("%w: upload %s stored %d bytes, sent %d", errMismatch, a.FID, res.Size, len(data))
	}
	return a.FID, nil
}

// rawRead is read through the lean client from the volume's first server.
// again: the read must go through the library client instead, because it
// needs a read token (401) or failed on a volume with another server to
// fail over to. A wrong answer (size, checksum) is a failure in any case.
func (w *worker) rawRead(b *bench, f *written) (n int, again bool, err error) {
	size := b.cfg.Size
	if w.locs == nil {
		w.locs = map[uint32]rawLoc{}
	}
	loc, ok := w.locs[f.id.Volume]
	if !ok {
		locs, err := b.c.Lookup(w.raw.ctx, f.id.Volume)
		if err != nil || len(locs) == 0 {
			return 0, true, nil
		}
		loc = rawLoc{host: hostOf(locs[0].URL), more: len(locs) > 1}
		w.locs[f.id.Volume] = loc
	}
	ans, err := w.raw.do(loc.host, "GET", "/"+f.id.String(), "", nil, w.buf)
	switch {
	case err == nil && ans.status == http.StatusOK:
		if ans.length != int64(size) || ans.n != size {
			return 0, false, fmt.Errorf("%w: %s has %d bytes, want %d", errMismatch, f.id, ans.length, size)
		}
		if crc32.Checksum(w.buf[:size], b.crc) != f.crc {
			return 0, false, fmt.Errorf("%w: %s checksum", errMismatch, f.id)
		}
		return size, false, nil
	case err == nil && ans.status == http.StatusUnauthorized || loc.more:
		delete(w.locs, f.id.Volume)
		return 0, true, nil
	case err != nil:
		return 0, false, fmt.Errorf("benchmark: get %s from %s: %w", f.id, loc.host, err)
	}
	msg := w.buf[:ans.n]
	if len(msg) > 200 {
		msg = msg[:200]
	}
	err = fmt.Errorf("benchmark: get %s from %s: %d %s: %s", f.id, loc.host, ans.status, http.StatusText(ans.status), bytes.TrimSpace(msg))
	if ans.status == http.StatusNotFound {
		err = fmt.Errorf("%w (%w)", err, client.ErrNotFound)
	}
	return 0, false, err
}

// rawLoc is where the lean client reads a volume from.
type rawLoc struct {
	host string
	more bool // the volume has other servers
}
