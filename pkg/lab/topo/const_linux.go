package topo

import "golang.org/x/sys/unix"

const nodad = unix.IFA_F_NODAD
