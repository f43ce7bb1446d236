//go:build !linux

package pool

import (
	"context"
	"errors"
)

// Workspaces with a disk of their own need Linux (loop devices, ext4);
// there are no sandboxes elsewhere either.

func diskTool(bool) (string, error) { return "", errors.New("--disk needs Linux") }

func diskRoom(string, int64, int) string { return "" }

func makeDisk(context.Context, string, string, string, int64, int) error {
	return errors.New("--disk needs Linux")
}

func unmountDisk(string) error { return nil }

func diskUsed(string) (uint64, error) { return 0, errors.New("--disk needs Linux") }

func unmountStale(string) {}

// The layer store of whole machines needs Linux (btrfs, overlayfs).

func openLayers(string, string, bool) (bool, error) {
	return false, errors.New("--machine needs Linux")
}

func limitLayer(string, int64) error { return errors.New("--machine needs Linux") }

func removeLayers(string) error { return nil }

func createLayer(string, bool) error { return errors.New("--machine needs Linux") }

func snapshotLayer(string, string, bool) error { return errors.New("--machine needs Linux") }

func deleteLayer(string) error { return nil }

func layerSize(string) int64 { return 0 }
