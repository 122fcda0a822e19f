//! Devices: where an op runs, and so which worker group's ready queue it joins.

use std::fmt;
use std::str::FromStr;

/// A device an op can be placed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// The CPU worker pool.
    Cpu,
    /// A GPU, by index.
    Gpu(u16),
    /// The copy workers, for transfers between devices.
    Copy,
    /// The link between two devices (0 is the CPU, k + 1 is GPU k), for copies between them.
    Link(u8, u8),
    /// The network: communication between ranks (`allreduce`, `send`, ...).
    Net,
}

/// The largest GPU index a device may have (worker groups live in a fixed table).
pub const MAX_GPUS: u16 = 62;

impl Device {
    /// The link between two devices (the CPU or GPUs), for copies between them.
    pub fn link(from: Device, to: Device) -> Device {
        Device::Link(from.endpoint_index(), to.endpoint_index())
    }

    /// The ends of a link, `(from, to)` (the CPU or GPUs); `None` for a device that is not one.
    pub fn link_ends(self) -> Option<(Device, Device)> {
        match self {
            Device::Link(from, to) => Some((Device::endpoint(from), Device::endpoint(to))),
            _ => None,
        }
    }

    fn endpoint_index(self) -> u8 {
        match self {
            Device::Gpu(index) => (index as u8).saturating_add(1),
            _ => 0,
        }
    }

    fn endpoint(index: u8) -> Device {
        match index {
            0 => Device::Cpu,
            gpu => Device::Gpu(u16::from(gpu - 1)),
        }
    }

    /// The device's slot in the engine's table of worker groups.
    pub(crate) fn slot(self) -> usize {
        match self {
            Device::Cpu => 0,
            Device::Copy | Device::Link(..) => 1,
            Device::Gpu(index) => 2 + index as usize,
            Device::Net => 2 + MAX_GPUS as usize,
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Gpu(index) => write!(f, "gpu{index}"),
            Device::Copy => f.write_str("copy"),
            Device::Net => f.write_str("net"),
            Device::Link(from, to) => {
                write!(f, "{}->{}", Device::endpoint(*from), Device::endpoint(*to))
            }
        }
    }
}

impl FromStr for Device {
    type Err = String;

    /// Parses what [`Device`]'s `Display` writes: `cpu`, `gpu1`, `copy`, and links such as
    /// `cpu->gpu0` (traces name an op's device so).
    fn from_str(text: &str) -> Result<Device, String> {
        let unknown = || format!("unknown device `{text}` (expected cpu, gpu0, gpu1, ...)");
        if let Some((from, to)) = text.split_once("->") {
            let endpoint = |end: &str| match end.parse::<Device>() {
                Ok(device @ (Device::Cpu | Device::Gpu(_))) => Ok(device),
                _ => Err(unknown()),
            };
            return Ok(Device::link(endpoint(from)?, endpoint(to)?));
        }
        match text {
            "cpu" => Ok(Device::Cpu),
            "copy" => Ok(Device::Copy),
            "net" => Ok(Device::Net),
            _ => text
                .strip_prefix("gpu")
                .and_then(|index| index.parse::<u16>().ok())
                .filter(|index| *index < MAX_GPUS)
                .map(Device::Gpu)
                .ok_or_else(unknown),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_knows_its_ends() {
        let link = Device::link(Device::Gpu(2), Device::Cpu);
        assert_eq!(link.link_ends(), Some((Device::Gpu(2), Device::Cpu)));
        assert_eq!(link.to_string(), "gpu2->cpu");
        let link = Device::link(Device::Cpu, Device::Gpu(0));
        assert_eq!(link.link_ends(), Some((Device::Cpu, Device::Gpu(0))));
        assert_eq!(Device::Gpu(0).link_ends(), None);
        assert_eq!(Device::Copy.link_ends(), None);
    }

    #[test]
    fn every_device_reads_back_what_it_writes() {
        for device in [
            Device::Cpu,
            Device::Copy,
            Device::Net,
            Device::Gpu(3),
            Device::link(Device::Cpu, Device::Gpu(0)),
            Device::link(Device::Gpu(1), Device::Gpu(0)),
            Device::link(Device::Gpu(2), Device::Cpu),
        ] {
            assert_eq!(device.to_string().parse::<Device>(), Ok(device));
        }
        for bad in [
            "cpu->",
            "->gpu0",
            "copy->cpu",
            "gpu0->gpu0->cpu",
            "gpu99->cpu",
            "tpu",
        ] {
            assert!(bad.parse::<Device>().is_err(), "{bad}");
        }
    }
}
