// Command kelp is the single binary of the Kelp object and file store.
package main

import (
	"os"

	"github.com/kelpfs/kelp/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args)) }
