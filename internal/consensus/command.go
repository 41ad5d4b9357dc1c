package consensus

import (
	"encoding/json"
	"fmt"
	"time"
)

// commandVersion is the first byte of every log entry written by this package.
// A master refuses entries of a version it does not know instead of guessing.
const commandVersion = 1

type commandType byte

const (
	cmdReserveKeys commandType = iota + 1
	cmdReserveVolumeIDs
	cmdRaiseVolumeID
	cmdSetSettings
	cmdAcquireLock
	cmdReleaseLock
	cmdInitAdminCredential
	cmdSetDeficits
)

// reserveKeys moves the key ceiling up by Count; the reply is the first key of
// the reserved block.
type reserveKeys struct {
	Count uint64 `json:"count"`
}

// reserveVolumeIDs allocates Count new volume ids; the reply is the first.
type reserveVolumeIDs struct {
	Count uint32 `json:"count"`
}

// raiseVolumeID makes sure MaxVolumeID >= ID, for volumes found on disks that
// the state does not know (e.g. a master whose metadata was lost).
type raiseVolumeID struct {
	ID uint32 `json:"id"`
}

// setSettings replaces the settings that are non-nil. With a LockToken the
// change is made only if that token holds the admin lock at Now: checking in
// the state machine makes the check and the change one atomic step.
type setSettings struct {
	VolumeSizeLimit    *uint64           `json:"volumeSizeLimit,omitempty"`
	DefaultReplication *string           `json:"defaultReplication,omitempty"`
	Collection         map[string]string `json:"collectionReplication,omitempty"` // "" value deletes
	// EcScheme sets erasure-coding schemes by collection ("" = the cluster
	// default); an empty scheme removes one.
	EcScheme map[string]string `json:"ecScheme,omitempty"`
	// WritePolicy sets write policies by collection ("" = the cluster
	// default); an empty policy removes one.
	WritePolicy map[string]string `json:"writePolicy,omitempty"`
	LockToken   uint64            `json:"lockToken,omitempty"`
	Now         time.Time         `json:"now,omitzero"`
}

// acquireLock takes (Token 0) or renews (Token = the held token) the admin
// lock. Now comes from the leader's clock so that every replica applies the
// same decision.
type acquireLock struct {
	Owner string    `json:"owner"`
	Token uint64    `json:"token,omitempty"`
	Now   time.Time `json:"now"`
	Lease int64     `json:"leaseNs"`
}

type releaseLock struct {
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
}

// initAdminCredential sets the admin UI's credential if the cluster has none
// yet: the first one committed wins, so masters racing to create it agree.
type initAdminCredential struct {
	Credential AdminCredential `json:"credential"`
}

// setDeficits records (Set) and ends (Clear) the replica deficits of
// volumes: the leader commits the changes of its deficit table.
type setDeficits struct {
	Set   map[uint32]Deficit `json:"set,omitempty"`
	Clear []uint32           `json:"clear,omitempty"`
}

func encodeCommand(t commandType, body any) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("consensus: encode command %d: %w", t, err)
	}
	return append([]byte{commandVersion, byte(t)}, b...), nil
}

func decodeCommand(data []byte) (commandType, any, error) {
	if len(data) < 2 {
		return 0, nil, fmt.Errorf("%w: entry of %d bytes", ErrBadEntry, len(data))
	}
	if data[0] != commandVersion {
		return 0, nil, fmt.Errorf("%w: version %d", ErrBadEntry, data[0])
	}
	t := commandType(data[1])
	var body any
	switch t {
	case cmdReserveKeys:
		body = &reserveKeys{}
	case cmdReserveVolumeIDs:
		body = &reserveVolumeIDs{}
	case cmdRaiseVolumeID:
		body = &raiseVolumeID{}
	case cmdSetSettings:
		body = &setSettings{}
	case cmdAcquireLock:
		body = &acquireLock{}
	case cmdReleaseLock:
		body = &releaseLock{}
	case cmdInitAdminCredential:
		body = &initAdminCredential{}
	case cmdSetDeficits:
		body = &setDeficits{}
	default:
		return 0, nil, fmt.Errorf("%w: command type %d", ErrBadEntry, t)
	}
	if err := json.Unmarshal(data[2:], body); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrBadEntry, err)
	}
	return t, body, nil
}
