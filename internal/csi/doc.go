// Package csi is Kelp's Container Storage Interface driver (`kelp csi`).
//
// A volume is a filer directory, <VolumeRoot>/<name>, whose quota (see
// filer.SetQuota) is the volume's capacity: the filer refuses a write that
// would pass it (ENOSPC through the mount). CreateVolume is idempotent by
// name; ControllerExpandVolume raises the quota, which applies at once on
// every node (NodeExpandVolume has nothing left to do).
//
// Mount model: one FUSE mount (internal/fuse over internal/fsview, rooted
// at the volume's directory) per volume and node, made at NodeStageVolume
// on the staging path and bind-mounted into each publish target. One mount
// per volume keeps one write-back cache and one filer connection however
// many pods use the volume on the node, and publishing is a cheap bind
// mount (read-only publishes are a read-only bind of the same mount).
//
// The FUSE mounts are served by the node plugin's process, so a restart of
// the plugin leaves them dead (ENOTCONN). Every stage and publish is
// recorded in a state file per volume under StateDir; at start the node
// plugin reads them, detaches whatever is stale (lazy unmount) and mounts
// again: the staging path with a new FUSE mount, then each publish target
// with a new bind mount of it.
package csi
