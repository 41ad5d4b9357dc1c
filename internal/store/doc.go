// Package store manages one volume server's disks: it finds and loads the
// volumes on each disk at start, allocates new volumes on the disk with the
// most free slots, deletes, marks, vacuums them, and reports their state.
//
// It owns the directory layout of a disk: every volume of the disk lives
// directly in the disk's directory as "<collection>_<id>.dat" (or "<id>.dat"
// for the default collection) with its ".idx" and ".ckp" (see package
// volume for those formats). A volume id is unique across the server's
// disks. Erasure-coded volumes live there too, as "<base>.ecx" (index),
// "<base>.ecj" (delete journal) and shard files "<base>.ecNN" (formats in
// package erasure; ec.go encodes, imports, rebuilds, decodes and unmounts
// them). There is no other on-disk state: the set of volumes is whatever
// .dat and .ecx files the directories hold.
//
// Changes a master must hear about at once (a volume allocated, deleted,
// marked read-only or writable, grown full, disabled by an I/O error,
// vacuumed) are reported through Config.OnChange. Notifications are
// coalesced and delivered from a goroutine the Store owns, so OnChange is
// never called with any store or volume lock held and may call back into
// the Store.
//
// Imported by the volume server; imports volume, erasure, vfs and the leaves.
package store
