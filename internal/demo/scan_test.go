package demo

import "fmt"

func fmtSscanf(line string, sab, rab, sba, rba *uint64) (int, error) {
	return fmt.Sscanf(line, "total: A→B %d sent, %d received; B→A %d sent, %d received;", sab, rab, sba, rba)
}
