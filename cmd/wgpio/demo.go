package main

import "errors"

func cmdDemo(args []string) error { return errors.New("demo: not built yet") }
