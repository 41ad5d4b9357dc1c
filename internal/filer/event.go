package filer

import (
	"encoding/binary"
	"fmt"
	"github.com/kelpfs/kelp/internal/varenc"
	"time"
)

// EventType says what a change did.
type EventType uint8

// Event types.
const (
	EventCreate EventType = 1
	EventUpdate EventType = 2
	EventDelete EventType = 3
	EventRename EventType = 4
)

func (t EventType) String() string {
	switch t {
	case EventCreate:
		return "create"
	case EventUpdate:
		return "update"
	case EventDelete:
		return "delete"
	case EventRename:
		return "rename"
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is one record of the metadata log. Old is the entry before the
// change (nil for create), New after it (nil for delete); a rename has
// both, with their paths.
type Event struct {
	Seq  uint64
	Type EventType
	Time time.Time
	Old  *Entry
	New  *Entry
}

const eventVersion = 1

func encodeEvent(ev *Event) []byte {
	b := []byte{eventVersion, byte(ev.Type)}
	b = binary.AppendVarint(b, unixNano(ev.Time))
	var flags byte
	if ev.Old != nil {
		flags |= 1
	}
	if ev.New != nil {
		flags |= 2
	}
	b = append(b, flags)
	for _, e := range []*Entry{ev.Old, ev.New} {
		if e != nil {
			b = varenc.AppendBytes(b, []byte(e.Path))
			b = varenc.AppendBytes(b, encodeEntry(e))
		}
	}
	return b
}

func decodeEvent(seq uint64, b []byte) (*Event, error) {
	if len(b) < 2 || b[0] != eventVersion {
		return nil, fmt.Errorf("%w: event %d: unknown version", ErrCorrupt, seq)
	}
	ev := &Event{Seq: seq, Type: EventType(b[1])}
	if ev.Type < EventCreate || ev.Type > EventRename {
		return nil, fmt.Errorf("%w: event %d: type %d", ErrCorrupt, seq, b[1])
	}
	d := varenc.NewDecoder(b[2:], ErrCorrupt)
	ev.Time = fromNano(d.Varint())
	flags := d.Byte()
	read := func() *Entry {
		p := string(d.Bytes())
		raw := d.Bytes()
		if d.Err() != nil {
			return nil
		}
		e, err := decodeEntry(p, raw)
		if err != nil {
			d.Fail(err)
			return nil
		}
		return e
	}
	if flags&1 != 0 {
		ev.Old = read()
	}
	if flags&2 != 0 {
		ev.New = read()
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("event %d: %w", seq, d.Err())
	}
	return ev, nil
}
