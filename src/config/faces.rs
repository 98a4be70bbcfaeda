//! What the routes of one AAP face share. AAP routes on one path form one face (its `/meta`
//! lists their agents), and one request reaches the face before it names an agent: so the face
//! accepts the credentials of every one of its routes (each route's `auth` becomes their
//! union, which also keeps the client's credential from any of its upstreams), and it has one
//! set of CORS rules, written on one of its routes or the same on several.

use std::collections::BTreeMap;

use super::auth::Auth;
use super::problems::Problems;
use super::routes::Built;

/// Gives the routes of each AAP face the face's authentication and CORS rules.
pub(super) fn share(p: &mut Problems, built: &mut [Built]) {
    let mut faces: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, b) in built.iter().enumerate() {
        if b.route.aap.is_some() {
            let path = b.route.path.trim_end_matches('/').to_owned();
            faces.entry(path).or_default().push(i);
        }
    }
    for members in faces.values().filter(|m| m.len() > 1) {
        let mut auth = None;
        for &i in members {
            if let Some(a) = &built[i].route.auth {
                auth.get_or_insert_with(Auth::default).join(a);
            }
        }
        let mut cors: Option<usize> = None;
        for &i in members {
            let Some(rules) = &built[i].route.cors else {
                continue;
            };
            match cors {
                None => cors = Some(i),
                Some(first) if built[first].route.cors.as_ref() == Some(rules) => {}
                Some(first) => {
                    let other = format!(
                        "{}, {}",
                        built[first].keys.whole(),
                        p.place(&built[first].path_span)
                    );
                    p.at(
                        built[i].path_span.clone(),
                        &built[i].keys.key("cors"),
                        format!(
                            "the routes of the AAP face {} have different [routes.cors]; write it on one of them (the other is {other})",
                            built[i].route.path
                        ),
                    );
                }
            }
        }
        let cors = cors.and_then(|i| built[i].route.cors.clone());
        for &i in members {
            built[i].route.auth.clone_from(&auth);
            if cors.is_some() {
                built[i].route.cors.clone_from(&cors);
            }
        }
    }
}
