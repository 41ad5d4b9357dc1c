package shell

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/chzyer/readline"
	"google.golang.org/grpc"
)

var (
	// ErrUnknownCommand: the line names no command.
	ErrUnknownCommand = errors.New("shell: unknown command")
	// ErrUsage: a command's flags or arguments are wrong.
	ErrUsage = errors.New("shell: usage")
	// ErrNotLocked: a command that changes the cluster ran without the admin lock.
	ErrNotLocked = errors.New("shell: this command changes the cluster and needs the admin lock; run `lock` first")
	// ErrLockLost: the lock's lease could not be renewed.
	ErrLockLost = errors.New("shell: admin lock lost")
	// ErrScriptFailed: a command of a script failed (the script stopped there).
	ErrScriptFailed = errors.New("shell: script failed")
	// ErrNotFound: a volume, node or collection named on the command line does not exist.
	ErrNotFound = errors.New("shell: not found")
)

// errExit is returned by `exit`: it ends a session without failing it.
var errExit = errors.New("shell: exit")

// Config configures a Shell. Masters is required.
type Config struct {
	// Masters are master addresses: HTTP host:port (gRPC at port+10000) or
	// host:port.grpcPort. One entry may be a comma-separated list.
	Masters []string
	Out     io.Writer // command output; nil means io.Discard
	Err     io.Writer // errors and progress; nil means Out
	// Owner names this shell in the admin lock, e.g. "shell@host"; empty
	// means "kelp shell".
	Owner string
	// LockLease is the admin lock's lease asked from the master; 0 leaves it
	// to the master (30 s by default). It is renewed at a third of its length.
	LockLease time.Duration
	// Terminal says Err is a terminal: progress is drawn as a bar rather than
	// printed as lines.
	Terminal bool
	// HistoryFile keeps the interactive history; empty means none.
	HistoryFile string
	Logger      *slog.Logger
	// DialOptions are added to every gRPC connection (tests, TLS).
	DialOptions []grpc.DialOption
	// VolumeDialOptions are added to the connections to volume servers
	// only (the admin token the masters vouch with, auth.Vouched).
	VolumeDialOptions []grpc.DialOption
}

// Shell runs admin commands against one cluster. Commands run one at a time;
// the only goroutine it starts is the lock renewal, stopped by Close.
type Shell struct {
	cfg      Config
	out, err io.Writer
	log      *slog.Logger
	commands []command

	conns *conns
	lock  *adminLock
	track *tracker // nil unless Out takes progress figures

	mu sync.Mutex // serialises commands
}

// command is one entry of the registry.
type command struct {
	name    string
	summary string // one line, shown by help
	// setup declares the command's flags on fs and returns what runs once
	// they are parsed; fs.Args() holds what is left.
	setup func(fs *flag.FlagSet) runFunc
}

type runFunc func(ctx context.Context, s *Shell, args []string) error

// New checks cfg and returns a Shell; it does not contact the cluster.
func New(cfg Config) (*Shell, error) {
	masters, err := parseMasters(cfg.Masters)
	if err != nil {
		return nil, err
	}
	s := &Shell{cfg: cfg, out: cfg.Out, err: cfg.Err, log: cfg.Logger, track: newTracker(cfg.Out)}
	if s.out == nil {
		s.out = io.Discard
	}
	if s.err == nil {
		s.err = s.out
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.cfg.Owner == "" {
		s.cfg.Owner = "kelp shell"
	}
	s.conns = newConns(masters, cfg.DialOptions)
	s.conns.volumeOpts = cfg.VolumeDialOptions
	s.lock = &adminLock{}
	// The registry, family by family; help lists it sorted.
	for _, family := range [][]command{
		lockCommands(), clusterCommands(), volumeCommands(), moveCommands(), collectionCommands(), ecCommands(), fsCommands(),
	} {
		s.commands = append(s.commands, family...)
	}
	slices.SortFunc(s.commands, func(a, b command) int { return strings.Compare(a.name, b.name) })
	return s, nil
}

// Close releases the admin lock if held and closes every connection.
func (s *Shell) Close() error {
	s.releaseLock(context.Background())
	return s.conns.close()
}

// Exec runs one line: commands separated by ';' or newlines. It stops at the
// first command that fails and returns its error.
func (s *Shell) Exec(ctx context.Context, line string) error {
	for _, cmdLine := range splitCommands(line) {
		if err := s.execOne(ctx, cmdLine); err != nil {
			return err
		}
	}
	return nil
}

// RunScript runs commands read from r until its end, the first failure
// (printed to Err; the result then wraps ErrScriptFailed) or `exit`.
func (s *Shell) RunScript(ctx context.Context, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		for _, cmdLine := range splitCommands(sc.Text()) {
			err := s.execOne(ctx, cmdLine)
			if errors.Is(err, errExit) {
				return nil
			}
			if err != nil {
				fmt.Fprintf(s.err, "error: %v\n", err)
				return fmt.Errorf("%w: %s: %w", ErrScriptFailed, cmdLine[0], err)
			}
		}
	}
	return sc.Err()
}

// Interrupter derives the context of one interactive command; the cli makes
// it cancel on Ctrl-C (SIGINT), so an interrupt stops the command, not the shell.
type Interrupter func(parent context.Context) (context.Context, context.CancelFunc)

// RunInteractive reads lines with editing and history until EOF (Ctrl-D) or
// `exit`. A failing command is reported and the session goes on.
func (s *Shell) RunInteractive(ctx context.Context, interrupt Interrupter) error {
	if interrupt == nil {
		interrupt = context.WithCancel
	}
	var names []readline.PrefixCompleterInterface
	for _, c := range s.commands {
		names = append(names, readline.PcItem(c.name))
	}
	names = append(names, readline.PcItem("help"), readline.PcItem("exit"))
	rl, err := readline.NewEx(&readline.Config{
		Prompt:          "kelp> ",
		HistoryFile:     s.cfg.HistoryFile,
		AutoComplete:    readline.NewPrefixCompleter(names...),
		InterruptPrompt: "^C",
		EOFPrompt:       "exit",
	})
	if err != nil {
		return fmt.Errorf("shell: line editor: %w", err)
	}
	defer rl.Close()
	fmt.Fprintln(s.out, "kelp shell: type help for the commands, Ctrl-D to leave")
	for ctx.Err() == nil {
		line, err := rl.Readline()
		if errors.Is(err, readline.ErrInterrupt) {
			continue
		}
		if err != nil { // io.EOF
			return nil
		}
		cctx, cancel := interrupt(ctx)
		err = s.Exec(cctx, line)
		cancel()
		if errors.Is(err, errExit) {
			return nil
		}
		if err != nil {
			fmt.Fprintf(s.err, "error: %v\n", err)
		}
	}
	return nil
}

func (s *Shell) execOne(ctx context.Context, args []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := args[0]
	switch name {
	case "help", "?":
		return s.help(args[1:])
	case "exit", "quit":
		return errExit
	}
	c, ok := s.lookup(name)
	if !ok {
		return fmt.Errorf("%w %q; type help for the list", ErrUnknownCommand, name)
	}
	fs := s.flagSet(c)
	run := c.setup(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %s: %w", ErrUsage, name, err)
	}
	if err := run(ctx, s, fs.Args()); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (s *Shell) lookup(name string) (command, bool) {
	i, ok := slices.BinarySearchFunc(s.commands, name, func(c command, n string) int { return strings.Compare(c.name, n) })
	if !ok {
		return command{}, false
	}
	return s.commands[i], true
}

func (s *Shell) flagSet(c command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(s.out)
	fs.Usage = func() {
		fmt.Fprintf(s.out, "%s: %s\n", c.name, c.summary)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintf(s.out, "usage of %s:\n", c.name)
			fs.PrintDefaults()
		}
	}
	return fs
}

func (s *Shell) help(args []string) error {
	if len(args) > 0 {
		c, ok := s.lookup(args[0])
		if !ok {
			return fmt.Errorf("%w %q", ErrUnknownCommand, args[0])
		}
		fs := s.flagSet(c)
		c.setup(fs)
		fs.Usage()
		return nil
	}
	width := 0
	for _, c := range s.commands {
		width = max(width, len(c.name))
	}
	for _, c := range s.commands {
		fmt.Fprintf(s.out, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(s.out, "  %-*s  %s\n", width, "help", "list commands; `help cmd` or `cmd -h` shows a command's flags")
	fmt.Fprintf(s.out, "  %-*s  %s\n", width, "exit", "leave the shell (releases the admin lock)")
	return nil
}

// noArgs rejects positional arguments for commands that take only flags.
func noArgs(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: unexpected argument %q (flags start with -)", ErrUsage, args[0])
	}
	return nil
}

// splitCommands splits a line into commands (on ';' and newlines, outside
// quotes) and each command into words; '#' starts a comment.
func splitCommands(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord, comment := false, false
	var quote rune
	endWord := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
			words = nil
		}
	}
	for _, r := range line {
		switch {
		case comment && r == '\n':
			comment = false
			endCmd()
		case comment:
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '"' || r == '\'':
			quote, inWord = r, true
		case r == '#' && !inWord:
			comment = true
		case r == ';' || r == '\n':
			endCmd()
		case r == ' ' || r == '\t' || r == '\r':
			endWord()
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endCmd()
	return cmds
}
