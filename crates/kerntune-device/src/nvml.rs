//! What the GPU's clocks were doing: SM and memory clocks, temperature, power, the reasons
//! the driver is holding the clocks down, and the energy counter, read through NVML.
//!
//! `libnvidia-ml.so.1` is opened with `dlopen` the first time [`nvml`] is called, like
//! NVRTC in [`crate::nvrtc`]: a machine without it gets `None`, and nothing else needs it.
//! Only queries are declared here; kerntune never sets clocks or limits. A [`Gauge`] reads
//! one device, found by its PCI address ([`crate::driver::Context::pci_bus_id`]), because
//! CUDA's ordinals and NVML's indexes differ under `CUDA_VISIBLE_DEVICES`.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr, CString};
use std::sync::OnceLock;

/// `nvmlReturn_t`; 0 is `NVML_SUCCESS`.
type Return = c_int;
/// `nvmlDevice_t`, an opaque handle owned by the library.
type Handle = *mut c_void;

type InitFn = unsafe extern "C" fn() -> Return;
type HandleByPciBusIdFn = unsafe extern "C" fn(*const c_char, *mut Handle) -> Return;
/// `nvmlDeviceGetClockInfo(device, nvmlClockType_t, unsigned int *mhz)`.
type ClockInfoFn = unsafe extern "C" fn(Handle, c_int, *mut c_uint) -> Return;
/// `nvmlDeviceGetTemperature(device, nvmlTemperatureSensors_t, unsigned int *celsius)`.
type TemperatureFn = ClockInfoFn;
/// `nvmlDeviceGetPowerUsage(device, unsigned int *milliwatts)`.
type PowerFn = unsafe extern "C" fn(Handle, *mut c_uint) -> Return;
/// `nvmlDeviceGetCurrentClocksEventReasons` (older name `...ThrottleReasons`), and
/// `nvmlDeviceGetTotalEnergyConsumption` (millijoules since the driver loaded).
type U64Fn = unsafe extern "C" fn(Handle, *mut c_ulonglong) -> Return;

const SUCCESS: Return = 0;
const CLOCK_SM: c_int = 1;
const CLOCK_MEMORY: c_int = 2;
const TEMPERATURE_GPU: c_int = 0;

/// The library, initialised; loaded once per process and never unloaded.
#[derive(Debug)]
pub struct Nvml {
    handle_by_pci_bus_id: HandleByPciBusIdFn,
    clock_info: Option<ClockInfoFn>,
    temperature: Option<TemperatureFn>,
    power: Option<PowerFn>,
    reasons: Option<U64Fn>,
    energy: Option<U64Fn>,
}

/// NVML, loaded and initialised at the first call; `None` where the library is missing or
/// does not initialise (no driver).
pub fn nvml() -> Option<&'static Nvml> {
    static LOADED: OnceLock<Option<Nvml>> = OnceLock::new();
    LOADED.get_or_init(|| Nvml::load("libnvidia-ml.so.1")).as_ref()
}

impl Nvml {
    /// Opens `library` and initialises it; `None` on any failure.
    fn load(library: &str) -> Option<Nvml> {
        let name = CString::new(library).ok()?;
        // SAFETY: dlopen of a shared library by name; the handle is kept open for the life
        // of the process on purpose, since the function pointers below point into it.
        let library = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if library.is_null() {
            return None;
        }
        let symbol = |name: &CStr| {
            // SAFETY: a symbol lookup in a library that stays loaded.
            let pointer = unsafe { libc::dlsym(library, name.as_ptr()) };
            (!pointer.is_null()).then_some(pointer)
        };
        // SAFETY (every transmute below): each symbol is NVML's function of that name, whose
        // C signature the type alias declares; the library is never unloaded.
        let init: InitFn = unsafe { std::mem::transmute::<*mut c_void, InitFn>(symbol(c"nvmlInit_v2")?) };
        let handle_by_pci_bus_id = unsafe {
            std::mem::transmute::<*mut c_void, HandleByPciBusIdFn>(symbol(c"nvmlDeviceGetHandleByPciBusId_v2")?)
        };
        let clock_info =
            symbol(c"nvmlDeviceGetClockInfo").map(|p| unsafe { std::mem::transmute::<*mut c_void, ClockInfoFn>(p) });
        let temperature = symbol(c"nvmlDeviceGetTemperature")
            .map(|p| unsafe { std::mem::transmute::<*mut c_void, TemperatureFn>(p) });
        let power =
            symbol(c"nvmlDeviceGetPowerUsage").map(|p| unsafe { std::mem::transmute::<*mut c_void, PowerFn>(p) });
        let reasons = symbol(c"nvmlDeviceGetCurrentClocksEventReasons")
            .or_else(|| symbol(c"nvmlDeviceGetCurrentClocksThrottleReasons"))
            .map(|p| unsafe { std::mem::transmute::<*mut c_void, U64Fn>(p) });
        let energy = symbol(c"nvmlDeviceGetTotalEnergyConsumption")
            .map(|p| unsafe { std::mem::transmute::<*mut c_void, U64Fn>(p) });
        // SAFETY: nvmlInit_v2 takes no arguments; it may be called more than once.
        if unsafe { init() } != SUCCESS {
            return None;
        }
        Some(Nvml { handle_by_pci_bus_id, clock_info, temperature, power, reasons, energy })
    }

    /// The device at a PCI address such as `00000000:3b:00.0`.
    pub fn device(&'static self, pci_bus_id: &str) -> Option<Gauge> {
        let address = CString::new(pci_bus_id).ok()?;
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: a NUL-terminated string and an out-parameter, both live for the call.
        let status = unsafe { (self.handle_by_pci_bus_id)(address.as_ptr(), &mut handle) };
        (status == SUCCESS && !handle.is_null()).then_some(Gauge { nvml: self, handle })
    }
}

/// Reads one device. The handle is NVML's and valid while the library is initialised,
/// which is for the rest of the process.
#[derive(Debug)]
pub struct Gauge {
    nvml: &'static Nvml,
    handle: Handle,
}

/// One reading; a field the device or driver does not report is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClockReading {
    pub sm_mhz: Option<u32>,
    pub memory_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_mw: Option<u32>,
    pub reasons: Option<ThrottleReasons>,
}

impl Gauge {
    /// Clocks, temperature, power and throttle reasons, now.
    pub fn read(&self) -> ClockReading {
        let nvml = self.nvml;
        let with_kind = |function: Option<ClockInfoFn>, kind| {
            let mut value: c_uint = 0;
            // SAFETY: a live handle, a valid enum value and an out-parameter.
            function.filter(|f| unsafe { f(self.handle, kind, &mut value) } == SUCCESS).map(|_| value)
        };
        let mut power: c_uint = 0;
        // SAFETY: a live handle and an out-parameter.
        let power_mw = nvml.power.filter(|f| unsafe { f(self.handle, &mut power) } == SUCCESS).map(|_| power);
        ClockReading {
            sm_mhz: with_kind(nvml.clock_info, CLOCK_SM),
            memory_mhz: with_kind(nvml.clock_info, CLOCK_MEMORY),
            temperature_c: with_kind(nvml.temperature, TEMPERATURE_GPU),
            power_mw,
            reasons: self.read_u64(nvml.reasons).map(ThrottleReasons),
        }
    }

    /// Energy used by the GPU since the driver was loaded, in millijoules (Volta and newer).
    pub fn energy_mj(&self) -> Option<u64> {
        self.read_u64(self.nvml.energy)
    }

    fn read_u64(&self, function: Option<U64Fn>) -> Option<u64> {
        let mut value: c_ulonglong = 0;
        // SAFETY: a live handle and an out-parameter.
        function.filter(|f| unsafe { f(self.handle, &mut value) } == SUCCESS).map(|_| value)
    }
}

/// NVML's clocks-event (throttle) reasons bitmask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThrottleReasons(pub u64);

/// The bits NVML defines (`nvmlClocksEventReason*` in `nvml.h`), with the names kerntune
/// reports, and whether each is the power or thermal kind that slows a measurement.
const REASONS: [(u64, &str, bool); 9] = [
    (0x1, "gpu_idle", false),
    (0x2, "applications_clocks_setting", false),
    (0x4, "sw_power_cap", true),
    (0x8, "hw_slowdown", true),
    (0x10, "sync_boost", false),
    (0x20, "sw_thermal_slowdown", true),
    (0x40, "hw_thermal_slowdown", true),
    (0x80, "hw_power_brake_slowdown", true),
    (0x100, "display_clock_setting", false),
];

impl ThrottleReasons {
    /// The names of the bits set, in bit order; a bit NVML added later shows as its value.
    pub fn names(self) -> Vec<String> {
        let known: u64 = REASONS.iter().map(|(bit, _, _)| bit).sum();
        let mut names: Vec<String> =
            REASONS.iter().filter(|(bit, _, _)| self.0 & bit != 0).map(|(_, name, _)| name.to_string()).collect();
        let unknown = self.0 & !known;
        names
            .extend((0..64).map(|shift| 1u64 << shift).filter(|bit| unknown & bit != 0).map(|bit| format!("{bit:#x}")));
        names
    }

    /// Only the power and thermal reasons: those that lower the clocks under load.
    pub fn slowing(self) -> ThrottleReasons {
        ThrottleReasons(REASONS.iter().filter(|(_, _, slowing)| *slowing).map(|(bit, _, _)| bit & self.0).sum())
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_none_not_a_panic() {
        assert!(Nvml::load("libkerntune-no-such-nvml.so.1").is_none());
    }

    #[test]
    fn nvml_answers_without_a_gpu() {
        // On a machine without the driver this is None; with one, an address that names no
        // device finds nothing. Either way it returns.
        if let Some(nvml) = nvml() {
            assert!(nvml.device("ffff:ff:1f.0").is_none());
        }
    }

    #[test]
    fn throttle_bits_decode_to_names_in_bit_order() {
        assert_eq!(ThrottleReasons(0x24).names(), ["sw_power_cap", "sw_thermal_slowdown"]);
        assert_eq!(ThrottleReasons(0x1).names(), ["gpu_idle"]);
        assert!(ThrottleReasons(0).names().is_empty());
    }

    #[test]
    fn an_unknown_throttle_bit_is_named_by_its_value() {
        assert_eq!(ThrottleReasons(0x400 | 0x40).names(), ["hw_thermal_slowdown", "0x400"]);
    }

    #[test]
    fn only_power_and_thermal_reasons_slow_a_measurement() {
        assert_eq!(ThrottleReasons(0x1 | 0x2 | 0x10 | 0x100).slowing(), ThrottleReasons(0));
        assert_eq!(ThrottleReasons(0x1 | 0x4 | 0x40).slowing(), ThrottleReasons(0x44));
        assert!(ThrottleReasons(0x1).slowing().is_empty());
    }
}
