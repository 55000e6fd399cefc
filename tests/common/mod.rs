pub mod alpaca_fake;
pub mod hl_fake;
pub mod openapi;
pub mod tws_fake;
