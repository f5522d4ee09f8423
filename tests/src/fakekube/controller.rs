//! The controllers the FAKE API server pretends to run, as writes to the store: a
//! workload's status after each write of it ([`super::rollout`] decides which), and the
//! deferred work (CRD establishment, a delayed rollout) the server runs when its time has
//! come.

use super::crd;
use super::resources::ResourceInfo;
use super::rollout::{progressing_status, ready_status, unpullable, RolloutMode};
use super::store::{Deferred, Key, State};

impl State {
    /// Writes a workload's status as its controller would, per the rollout mode.
    pub(crate) fn start_rollout(&mut self, res: &ResourceInfo, k: &Key) {
        let Some(obj) = self.objects.get(k) else {
            return;
        };
        let mode = self
            .settings
            .rollout_overrides
            .get(&(k.2.clone(), k.3.clone()))
            .copied()
            .unwrap_or(self.settings.rollout_default);
        let mode = if mode == RolloutMode::Ready && unpullable(obj) {
            RolloutMode::Stuck
        } else {
            mode
        };
        let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
        let status = match mode {
            RolloutMode::None => return,
            RolloutMode::Stuck => progressing_status(res, obj),
            RolloutMode::Ready if !self.settings.rollout_delay.is_zero() => {
                self.pending.push((
                    self.settings.rollout_delay,
                    Deferred::Rollout(k.clone(), generation),
                ));
                progressing_status(res, obj)
            }
            RolloutMode::Ready => ready_status(res, obj),
        };
        if let Some(st) = status {
            self.write_status(res, k, st);
        }
    }

    /// Runs deferred work whose time has come.
    pub fn run_deferred(&mut self, d: Deferred) {
        match d {
            Deferred::Establish(k) => {
                if let Some(mut obj) = self.objects.get(&k).cloned() {
                    crd::set_crd_established(&mut obj);
                    let res = crd::crd_res();
                    self.write_status(&res, &k, obj["status"].clone());
                    self.refresh_custom();
                }
            }
            Deferred::Rollout(k, generation) => {
                let Some(obj) = self.objects.get(&k) else {
                    return;
                };
                if obj["metadata"]["generation"].as_i64() != Some(generation) {
                    return;
                }
                let Some(res) = self
                    .all_resources()
                    .find(|r| r.group == k.0 && r.plural == k.1)
                    .cloned()
                else {
                    return;
                };
                if let Some(st) = ready_status(&res, obj) {
                    self.write_status(&res, &k, st);
                }
            }
        }
    }
}
