package sandbox

import (
	"fmt"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// This file turns the policy (the profile's rules as go-seccomp-bpf
// groups) into classic BPF itself. The library's own assembler loads the
// call's number once and, after a rule with argument conditions that did
// not match, goes on comparing the accumulator, which then holds the
// argument, with the next rules' call numbers: personality(56) was let
// through by clone's rule (56 is clone's number on x86-64, and clone's
// condition then held for personality's argument). Here every rule that
// follows a conditional rule loads the number again, so each rule sees
// the call's number and its own arguments only.
//
// The program is linear, in the policy's order (refusals first):
//
//	load arch; if not ours: default action
//	load nr; (x86-64) if nr >= x32 bit: ENOSYS
//	for each rule: [load nr] if nr != N skip; [conditions, each failing
//	    to the rule's end]; return the rule's action
//	return the default action
//
// Every jump is forward and within one rule (a rule is at most a few
// dozen instructions), so the 8-bit offsets of conditional jumps always
// suffice.

// seccompData offsets (struct seccomp_data): nr, arch, then args.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// rule is one call's check: its number, the conditions that must all
// hold (none: the number alone), and the action.
type rule struct {
	nr     uint32
	conds  seccompbpf.ArgumentConditions
	action seccompbpf.Action
}

// compileFilter assembles p for info's architecture.
func compileFilter(p *seccompbpf.Policy, info *arch.Info) ([]bpf.Instruction, error) {
	var rules []rule
	for _, g := range p.Syscalls {
		for _, name := range g.Names {
			n, ok := info.SyscallNames[name]
			if !ok {
				return nil, fmt.Errorf("no system call %q on %s", name, info.Name)
			}
			rules = append(rules, rule{nr: uint32(n | info.SeccompMask), action: g.Action})
		}
		for _, nc := range g.NamesWithCondtions {
			n, ok := info.SyscallNames[nc.Name]
			if !ok {
				return nil, fmt.Errorf("no system call %q on %s", nc.Name, info.Name)
			}
			rules = append(rules, rule{nr: uint32(n | info.SeccompMask), conds: nc.Conditions, action: g.Action})
		}
	}
	def := actionValue(p.DefaultAction)
	body := []bpf.Instruction{bpf.LoadAbsolute{Off: offNr, Size: 4}}
	if info.ID == arch.X86_64.ID {
		body = append(body,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(arch.X32.SeccompMask), SkipFalse: 1},
			bpf.RetConstant{Val: uint32(seccompbpf.ActionErrno) | uint32(errnoENOSYS)})
	}
	reload := false // the accumulator holds an argument, not the number
	for _, r := range rules {
		block, err := ruleBlock(r)
		if err != nil {
			return nil, err
		}
		if reload {
			body = append(body, bpf.LoadAbsolute{Off: offNr, Size: 4})
		}
		if len(block) > 255 {
			return nil, fmt.Errorf("a rule of %d instructions", len(block))
		}
		body = append(body, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(block))})
		body = append(body, block...)
		reload = len(r.conds) > 0
	}
	body = append(body, bpf.RetConstant{Val: def})
	// The architecture check jumps to the last instruction (the default
	// action) when the call is not of ours: a long jump.
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: def},
	}
	prog = append(prog, body...)
	if len(prog) > 4096 {
		return nil, fmt.Errorf("a filter of %d instructions (the kernel takes 4096)", len(prog))
	}
	return prog, nil
}

// errnoENOSYS is ENOSYS for an errno action's data.
const errnoENOSYS = 38

// actionValue is an action as the kernel reads it (a bare errno action
// is EPERM, as the library makes it).
func actionValue(a seccompbpf.Action) uint32 {
	if a == seccompbpf.ActionErrno {
		return uint32(a) | 1 // EPERM
	}
	return uint32(a)
}

// ruleBlock is a rule's body after its number matched: its conditions,
// each jumping past the block's end when it fails, then the action.
func ruleBlock(r rule) ([]bpf.Instruction, error) {
	// Conditions are built back to front, so that each knows how far the
	// block's end (the instruction after the return) is.
	tail := []bpf.Instruction{bpf.RetConstant{Val: actionValue(r.action)}}
	for i := len(r.conds) - 1; i >= 0; i-- {
		c := r.conds[i]
		hi, lo := uint32(c.Value>>32), uint32(c.Value)
		hiOff, loOff := uint32(offArgs+8*c.Argument+4), uint32(offArgs+8*c.Argument) // little-endian
		if c.Argument > 5 {
			return nil, fmt.Errorf("argument %d", c.Argument)
		}
		// fail is the distance from the instruction after a jump at the
		// condition's index k to the block's end, given the condition's
		// length n: the block's end is len(tail) past the condition.
		var cond []bpf.Instruction
		end := func(k, n int) int { return n - (k + 1) + len(tail) }
		switch c.Operation {
		case seccompbpf.Equal: // hi == vh && lo == vl
			cond = []bpf.Instruction{bpf.LoadAbsolute{Off: hiOff, Size: 4}, nil, bpf.LoadAbsolute{Off: loOff, Size: 4}, nil}
			cond[1] = bpf.JumpIf{Cond: bpf.JumpEqual, Val: hi, SkipFalse: skip(end(1, 4))}
			cond[3] = bpf.JumpIf{Cond: bpf.JumpEqual, Val: lo, SkipFalse: skip(end(3, 4))}
		case seccompbpf.NotEqual: // hi != vh || lo != vl
			cond = []bpf.Instruction{bpf.LoadAbsolute{Off: hiOff, Size: 4}, nil, bpf.LoadAbsolute{Off: loOff, Size: 4}, nil}
			cond[1] = bpf.JumpIf{Cond: bpf.JumpEqual, Val: hi, SkipFalse: 2} // differs: holds
			cond[3] = bpf.JumpIf{Cond: bpf.JumpEqual, Val: lo, SkipTrue: skip(end(3, 4))}
		case seccompbpf.BitsNotSet: // hi & mh == 0 && lo & ml == 0
			cond = []bpf.Instruction{bpf.LoadAbsolute{Off: hiOff, Size: 4}, nil, bpf.LoadAbsolute{Off: loOff, Size: 4}, nil}
			cond[1] = bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: hi, SkipTrue: skip(end(1, 4))}
			cond[3] = bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: lo, SkipTrue: skip(end(3, 4))}
		case seccompbpf.BitsSet: // any of the bits: hi & mh != 0 || lo & ml != 0
			cond = []bpf.Instruction{bpf.LoadAbsolute{Off: hiOff, Size: 4}, nil, bpf.LoadAbsolute{Off: loOff, Size: 4}, nil}
			cond[1] = bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: hi, SkipTrue: 2}
			cond[3] = bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: lo, SkipFalse: skip(end(3, 4))}
		case seccompbpf.LessThan, seccompbpf.LessOrEqual: // hi < vh || (hi == vh && lo <(=) vl)
			last := bpf.JumpGreaterOrEqual // fails lo < vl
			if c.Operation == seccompbpf.LessOrEqual {
				last = bpf.JumpGreaterThan // fails lo <= vl
			}
			cond = []bpf.Instruction{bpf.LoadAbsolute{Off: hiOff, Size: 4}, nil, nil, bpf.LoadAbsolute{Off: loOff, Size: 4}, nil}
			cond[1] = bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: hi, SkipTrue: skip(end(1, 5))}
			cond[2] = bpf.JumpIf{Cond: bpf.JumpEqual, Val: hi, SkipFalse: 2} // hi < vh: holds
			cond[4] = bpf.JumpIf{Cond: last, Val: lo, SkipTrue: skip(end(4, 5))}
		case seccompbpf.GreaterThan, seccompbpf.GreaterOrEqual: // hi > vh || (hi == vh && lo >(=) vl)
			last := bpf.JumpGreaterThan
			if c.Operation == seccompbpf.GreaterOrEqual {
				last = bpf.JumpGreaterOrEqual
			}
			cond = []bpf.Instruction{bpf.LoadAbsolute{Off: hiOff, Size: 4}, nil, nil, bpf.LoadAbsolute{Off: loOff, Size: 4}, nil}
			cond[1] = bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: hi, SkipTrue: 3} // hi > vh: holds
			cond[2] = bpf.JumpIf{Cond: bpf.JumpEqual, Val: hi, SkipFalse: skip(end(2, 5))}
			cond[4] = bpf.JumpIf{Cond: last, Val: lo, SkipFalse: skip(end(4, 5))}
		default:
			return nil, fmt.Errorf("comparison %s", c.Operation)
		}
		tail = append(cond, tail...)
	}
	return tail, nil
}

// skip is a jump's offset; ruleBlock's callers keep blocks under 256.
func skip(n int) uint8 { return uint8(n) }
