// The sandbox process of every pod on the real node (deploy/localcluster/README.md): PID 1 of the
// pod's shared namespaces. Like Kubernetes' own pause (C, not on the Go module proxy), it waits for
// SIGINT or SIGTERM and reaps orphaned children meanwhile.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
