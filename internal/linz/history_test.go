package linz

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// An op on one key: a read, a write of a value, or a delete.
type kvInput struct {
	Op    byte // 'g', 'p', 'd'
	Key   string
	Value string // of a put
}

// kvOutput is what a read saw ("" is absent: values written are never
// empty); Unknown marks a write whose outcome the client never learned.
type kvOutput struct {
	Value   string
	Unknown bool
}

// registerModel is a register per key: the state is the key's value, ""
// when absent. A put sets it, a delete clears it, a get must see it.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(kvInput).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in, out := input.(kvInput), output.(kvOutput)
		switch in.Op {
		case 'p':
			return true, in.Value
		case 'd':
			return true, ""
		default:
			return out.Value == state.(string), state
		}
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(kvInput), output.(kvOutput)
		switch in.Op {
		case 'p':
			return fmt.Sprintf("put(%s, %s)%s", in.Key, in.Value, unknown(out))
		case 'd':
			return fmt.Sprintf("delete(%s)%s", in.Key, unknown(out))
		}
		return fmt.Sprintf("get(%s) -> %q", in.Key, out.Value)
	},
}

func unknown(out kvOutput) string {
	if out.Unknown {
		return " ?"
	}
	return ""
}

// kv is the API under test: Get returns "" for an absent key.
type kv interface {
	Get(key string) (string, error)
	Put(key, value string) error
	Delete(key string) error
}

// errRefused marks a write refused before it changed anything (a WebDAV 423
// Locked: x/net/webdav refuses a write to a path another request is
// writing), or a read of a state no register has (WebDAV's empty file
// while a PUT runs). Such operations are left out of the history.
var errRefused = errors.New("refused, not applied")

// recorder collects a history. Times are nanoseconds since start on the
// monotonic clock.
type recorder struct {
	start time.Time

	mu      sync.Mutex
	ops     []porcupine.Operation
	pending []int // indexes of writes whose outcome is unknown
	failed  int   // reads that failed and refused writes (left out: they changed nothing)
	clients int
	errs    map[string]int // error kinds seen, for the log
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// newClient returns a fresh client id: a client whose write's outcome is
// unknown goes on as a new client, as porcupine's histories expect of one
// client's operations never overlapping.
func (r *recorder) newClient() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clients++
	return r.clients - 1
}

// do runs one op through s and records it; it returns the client id to
// use next.
func (r *recorder) do(client int, s kv, in kvInput) int {
	call := r.now()
	var out kvOutput
	var err error
	switch in.Op {
	case 'g':
		out.Value, err = s.Get(in.Key)
	case 'p':
		err = s.Put(in.Key, in.Value)
	case 'd':
		err = s.Delete(in.Key)
	}
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if r.errs == nil {
			r.errs = map[string]int{}
		}
		msg := err.Error()
		if len(msg) > 80 {
			msg = msg[:80]
		}
		r.errs[string(in.Op)+": "+msg]++
		if in.Op == 'g' || errors.Is(err, errRefused) {
			r.failed++
			return client
		}
		// The write may take effect at any time from its call on: its
		// return is put after everything else when the history ends.
		r.pending = append(r.pending, len(r.ops))
		r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: kvOutput{Unknown: true}})
		r.clients++
		return r.clients - 1
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	return client
}

// check ends the history and checks it; it fails t on a violation (writing
// the visualization when KELP_LINZ_VIS is set) and reports the counts.
func (r *recorder) check(t *testing.T, name string) {
	t.Helper()
	r.mu.Lock()
	end := r.now() + 1
	for _, i := range r.pending {
		r.ops[i].Return = end
	}
	ops := r.ops
	unknowns, failed := len(r.pending), r.failed
	for e, n := range r.errs {
		t.Logf("%dx %s", n, e)
	}
	r.mu.Unlock()
	reads := 0
	for _, op := range ops {
		if op.Input.(kvInput).Op == 'g' {
			reads++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, ops, 2*time.Minute)
	t.Logf("%s: %d ops checked (%d reads, %d writes, %d of them with unknown outcome; %d failed reads and refused writes left out): %s",
		name, len(ops), reads, len(ops)-reads, unknowns, failed, res)
	if res == porcupine.Ok {
		return
	}
	if dir := os.Getenv("KELP_LINZ_VIS"); dir != "" {
		p := filepath.Join(dir, name+".html")
		if err := porcupine.VisualizePath(registerModel, info, p); err == nil {
			t.Logf("visualization: %s", p)
		}
	}
	if res == porcupine.Illegal {
		t.Errorf("%s: history is NOT linearizable", name)
	} else {
		t.Errorf("%s: the checker gave up (%s); run with fewer ops", name, res)
	}
}

// opsWanted is the number of operations a test runs: KELP_LINZ_OPS, or def.
func opsWanted(t *testing.T, def int) int {
	if s := os.Getenv("KELP_LINZ_OPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("KELP_LINZ_OPS=%q: want a positive number", s)
		}
		return n
	}
	return def
}

// workload runs ops operations from clients concurrent clients over keys
// keys through s: half reads, the rest writes of unique values and deletes.
// It returns when all are done; done is closed then.
func workload(r *recorder, s kv, prefix string, clients, keys, ops int, seed uint64) (done chan struct{}) {
	done = make(chan struct{})
	var wg sync.WaitGroup
	per := (ops + clients - 1) / clients
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(c)))
			id := r.newClient()
			for i := 0; i < per; i++ {
				in := kvInput{Key: fmt.Sprintf("%sk%d", prefix, rng.IntN(keys))}
				switch x := rng.IntN(20); {
				case x < 10:
					in.Op = 'g'
				case x < 17:
					in.Op, in.Value = 'p', fmt.Sprintf("c%d-%d", c, i)
				default:
					in.Op = 'd'
				}
				id = r.do(id, s, in)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

// TestModelCatchesStaleRead: the model refuses a read of an overwritten value
// and accepts one of a write with unknown outcome.
func TestModelCatchesStaleRead(t *testing.T) {
	op := func(c int, in kvInput, call int64, out kvOutput, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
	}
	stale := []porcupine.Operation{
		op(0, kvInput{Op: 'p', Key: "k", Value: "a"}, 0, kvOutput{}, 1),
		op(0, kvInput{Op: 'p', Key: "k", Value: "b"}, 2, kvOutput{}, 3),
		op(1, kvInput{Op: 'g', Key: "k"}, 4, kvOutput{Value: "a"}, 5),
	}
	if porcupine.CheckOperations(registerModel, stale) {
		t.Fatal("a stale read passed")
	}
	deleted := []porcupine.Operation{
		op(0, kvInput{Op: 'p', Key: "k", Value: "a"}, 0, kvOutput{}, 1),
		op(0, kvInput{Op: 'd', Key: "k"}, 2, kvOutput{}, 3),
		op(1, kvInput{Op: 'g', Key: "k"}, 4, kvOutput{Value: "a"}, 5),
	}
	if porcupine.CheckOperations(registerModel, deleted) {
		t.Fatal("a read of a deleted value passed")
	}
	maybe := []porcupine.Operation{
		op(0, kvInput{Op: 'p', Key: "k", Value: "a"}, 0, kvOutput{}, 1),
		op(1, kvInput{Op: 'p', Key: "k", Value: "b"}, 2, kvOutput{Unknown: true}, 100),
		op(2, kvInput{Op: 'g', Key: "k"}, 4, kvOutput{Value: "a"}, 5),
		op(2, kvInput{Op: 'g', Key: "k"}, 6, kvOutput{Value: "b"}, 7),
	}
	if !porcupine.CheckOperations(registerModel, maybe) {
		t.Fatal("a write with unknown outcome could not take effect late")
	}
}
