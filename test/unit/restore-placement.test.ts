import { describe, expect, it } from 'vitest';
import { FailureType } from '../../src/model/failures';
import type { Presence } from '../../src/model/fleet';
import { placeRestore } from '../../src/model/restore-placement';

/* Where a restore runs (issue 25 #7): found by UUID on every live host, never by a reused name. */
const UUID = '6f1c2a3b-0000-4000-8000-00000000a001';
const vm = { uuid: UUID, name: 'vm-42' };
const q = (host: string) => `vmsnap-${host}`;
const has = (host: string, state: string): Presence => ({ host, taskQueue: q(host), found: true, uuid: UUID, name: 'vm-42', state });
const lacks = (host: string): Presence => ({ host, taskQueue: q(host), found: false });

describe('in place', () => {
  it('runs on the one host where the VM is defined, shut off', () => {
    expect(placeRestore({ ...vm, mode: 'in-place', stop: false }, [lacks('hv-a'), has('hv-b', 'shutoff')], [])).toEqual({ ok: true, host: 'hv-b', taskQueue: q('hv-b') });
  });

  it('refuses while the VM runs on any host, even with a stale shut-off definition here', () => {
    const p = placeRestore({ ...vm, mode: 'in-place', stop: false }, [has('hv-a', 'shutoff'), has('hv-b', 'running')], []);
    expect(p).toMatchObject({ ok: false, retry: false, type: FailureType.DomainRunning });
    expect(p.ok || p.message).toMatch(/running on hv-b.*--stop/);
  });

  it('with --stop, runs where the VM runs (its own host stops it), never beside a stale definition', () => {
    expect(placeRestore({ ...vm, mode: 'in-place', stop: true }, [has('hv-a', 'shutoff'), has('hv-b', 'running')], [])).toEqual({ ok: true, host: 'hv-b', taskQueue: q('hv-b') });
  });

  it('a paused VM is not shut off', () => {
    expect(placeRestore({ ...vm, mode: 'in-place', stop: false }, [has('hv-b', 'paused')], [])).toMatchObject({ ok: false, type: FailureType.DomainRunning });
  });

  it('a live host that did not answer may be running it: unsure, retryable', () => {
    expect(placeRestore({ ...vm, mode: 'in-place', stop: false }, [has('hv-a', 'shutoff')], ['hv-b'])).toMatchObject({ ok: false, retry: true, type: FailureType.DomainNotPlaced });
  });

  it('shut off on two hosts: not guessed between', () => {
    const p = placeRestore({ ...vm, mode: 'in-place', stop: false }, [has('hv-a', 'shutoff'), has('hv-b', 'shutoff')], []);
    expect(p).toMatchObject({ ok: false, retry: false, type: FailureType.DomainNotPlaced });
  });

  it('a VM on no host: DomainNotFound, non-retryable (a same-name VM with another UUID is not it)', () => {
    const other: Presence = { host: 'hv-a', taskQueue: q('hv-a'), found: true, uuid: '6f1c2a3b-0000-4000-8000-00000000b002', name: 'vm-42', state: 'shutoff' };
    expect(placeRestore({ ...vm, mode: 'in-place', stop: false }, [other, lacks('hv-b')], [])).toMatchObject({ ok: false, retry: false, type: FailureType.DomainNotFound });
  });
});

describe('as a new VM', () => {
  it('beside the source VM, wherever it runs', () => {
    expect(placeRestore({ ...vm, mode: 'as', stop: false }, [lacks('hv-a'), has('hv-b', 'running')], [])).toEqual({ ok: true, host: 'hv-b', taskQueue: q('hv-b') });
  });

  it('on the host the caller named', () => {
    expect(placeRestore({ ...vm, mode: 'as', stop: false, host: 'hv-a' }, [lacks('hv-a'), has('hv-b', 'running')], [])).toEqual({ ok: true, host: 'hv-a', taskQueue: q('hv-a') });
  });

  it('the source VM gone everywhere: the caller must name the host', () => {
    expect(placeRestore({ ...vm, mode: 'as', stop: false }, [lacks('hv-a'), lacks('hv-b')], [])).toMatchObject({ ok: false, retry: false, type: FailureType.DomainNotPlaced });
  });

  describe('with room (a verify copy, restore --as without --host)', () => {
    const GiB = 1024 * 1024;
    const roomy = (p: Presence, roomKiB: number): Presence => ({ ...p, roomKiB });
    const need = { ...vm, mode: 'as' as const, stop: false, needKiB: 2 * GiB };

    it('beside the source when its memory fits there', () => {
      expect(placeRestore(need, [roomy(has('hv-a', 'running'), 3 * GiB), roomy(lacks('hv-b'), 20 * GiB)], [])).toEqual({ ok: true, host: 'hv-a', taskQueue: q('hv-a') });
    });

    it('else on the answering host with the most room', () => {
      const answers = [roomy(has('hv-a', 'running'), 1 * GiB), roomy(lacks('hv-b'), 4 * GiB), roomy(lacks('hv-c'), 9 * GiB), roomy(lacks('hv-d'), 1.5 * GiB)];
      expect(placeRestore(need, answers, [])).toEqual({ ok: true, host: 'hv-c', taskQueue: q('hv-c') });
    });

    it('nowhere with room: NoCapacity, non-retryable, naming each host\'s room', () => {
      const p = placeRestore(need, [roomy(has('hv-a', 'running'), 1 * GiB), roomy(lacks('hv-b'), 0)], []);
      expect(p).toMatchObject({ ok: false, retry: false, type: FailureType.NoCapacity });
      expect(p.ok || p.message).toMatch(/2048 MiB.*hv-a 1024 MiB, hv-b 0 MiB.*--host/);
    });

    it('nowhere with room among those that answered, one silent: unsure, retryable', () => {
      expect(placeRestore(need, [roomy(has('hv-a', 'running'), 1 * GiB)], ['hv-b'])).toMatchObject({ ok: false, retry: true, type: FailureType.DomainNotPlaced });
    });

    it('room unknown (not asked) beside the source: placed there, as before room was asked', () => {
      expect(placeRestore(need, [has('hv-a', 'running'), roomy(lacks('hv-b'), 9 * GiB)], [])).toEqual({ ok: true, host: 'hv-a', taskQueue: q('hv-a') });
    });

    it('--host wins over room', () => {
      expect(placeRestore({ ...need, host: 'hv-b' }, [roomy(has('hv-a', 'running'), 9 * GiB), roomy(lacks('hv-b'), 0)], [])).toEqual({ ok: true, host: 'hv-b', taskQueue: q('hv-b') });
    });
  });
});
