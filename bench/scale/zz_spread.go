package main

import (
	"os"
	"strconv"
)

func spreadOverride() int {
	if v, err := strconv.Atoi(os.Getenv("SPREAD")); err == nil {
		return v
	}
	return 10000
}
